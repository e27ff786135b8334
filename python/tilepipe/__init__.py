import sys; from . import _C
