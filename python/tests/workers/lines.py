# lines.py — imported first by every worker: each line a worker prints reaches the ranks' shared pipe
# in one write. torchrun starts workers with `python -u`, whose print() writes a line's text and its
# newline apart, so ranks' lines ran together ("...in Cringo collectives rank 1"). Run: by the workers.
import sys

sys.stdout.reconfigure(line_buffering=True, write_through=False)
