__version__ = "0.1.0"

from . import quiet as _quiet

_quiet.install()
