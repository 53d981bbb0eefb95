"""`invoke TASK` in this checkout: the tasks of cleanbuild.cli.collection, the same as `atom-build TASK`.

The plain task collection invoke expects: importing this module defines the tasks and nothing else (it reads no
command line and installs no handler). Each task keeps README's one-line errors and exit codes (its error boundary,
cleanbuild.cli.signature); what needs the process or the command line (Ctrl-C while starting, every config file
checked before invoke reads it, help and lists into a closed pipe, exit 2 on a parse error) is atom-build's Program
(cleanbuild.cli.program). README: Exit codes.
"""

from cleanbuild.cli.collection import ns

__all__ = ["ns"]
