"""Code that several overlays share (``patches/<id>.py`` import it; ``import patchlane`` never
does). One fix serves every entry that carries it; each entry still retires alone, and the
module goes when its last user does (``patchlane delete`` leaves files to the maintainer).
Modules here import torch only inside their functions."""
