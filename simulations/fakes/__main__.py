"""`python -m simulations.fakes [--host H] [--port P] [--seed N] [--default-fault SPEC]`: serve
the fake providers until interrupted (what `switchover fake-providers` runs)."""

from __future__ import annotations

import argparse

from simulations.fakes.server import serve_forever


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m simulations.fakes", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--default-fault", default="ok", help="e.g. 'overloaded:rate=0.05'")
    args = parser.parse_args()
    serve_forever(args.host, args.port, seed=args.seed, default_fault=args.default_fault)


if __name__ == "__main__":
    main()
