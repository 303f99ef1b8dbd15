"""oodcorr: do generalisation results generalise?"""
__version__ = "0.1.0"
