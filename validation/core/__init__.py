"""The image side's foundation: arch facts (archs), model shapes (models), the device (device, interpreter), a git
checkout's HEAD (git_head) and what every command line shares (usage, outputs). Imports nothing else of
validation/; archs, models and usage are standard library only (the host and the clean build step read them)."""
