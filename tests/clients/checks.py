"""What the client scripts share: a check that prints one line and stops the script at the first
failure, naming it."""
import sys


class Check:
    """`check(name, ok, detail)`: prints `ok   name`, or `FAIL name: detail` and exits 1."""

    def __init__(self):
        self.n = 0

    def __call__(self, name, ok, detail=""):
        self.n += 1
        if not ok:
            print(f"FAIL {name}: {detail}", flush=True)
            sys.exit(1)
        print(f"ok   {name}", flush=True)
