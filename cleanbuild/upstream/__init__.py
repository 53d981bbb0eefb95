"""What the images are built from: profiles, pins, the lock, the git repositories and their imports."""
