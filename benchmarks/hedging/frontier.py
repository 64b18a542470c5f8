"""Redraw the hedging frontier picture from saved figures, without rerunning anything.

``hedging_model.py --grid full --json M`` saves the model grid's points and
``hedging_tail_latency.py --json C`` the client's rows; this draws them as
``model.py --png`` does (``_frontier.frontier_spec``)::

    .venv/bin/python -m benchmarks.hedging.frontier \\
        [--model benchmarks/results/hedging_model.json] \\
        [--client benchmarks/results/hedging_client.json] [--png docs/hedging_frontier.png]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from benchmarks.hedging._frontier import (
    frontier_spec,
    load_client_rows,
    load_grid_points,
    write_png,
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="benchmarks/results/hedging_model.json")
    parser.add_argument("--client", default="benchmarks/results/hedging_client.json")
    parser.add_argument("--png", default="docs/hedging_frontier.png")
    options = parser.parse_args(argv)
    spec = frontier_spec(load_grid_points(options.model), load_client_rows(options.client))
    write_png(spec, options.png)
    print(f"frontier picture written to {options.png}")


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
