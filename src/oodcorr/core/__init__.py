"""The thin core every other package stands on: atomic file writes (io), one-process-at-a-time locks (locks),
the one-line user error (errors), credential masking (credentials), whether the hub may be contacted (hub) and
the plain tables that settings and modeling share (choices), and MKL's thread-independent arithmetic
(numerics). It imports nothing else of oodcorr."""
