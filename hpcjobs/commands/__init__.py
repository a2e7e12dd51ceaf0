"""Click commands that live in their own modules, registered lazily in :data:`hpcjobs.cli.LAZY_COMMANDS`.

Each module imports its heavy dependencies (pandas, matplotlib) inside the command function, so
``hpcjobs --help`` never imports them.
"""
