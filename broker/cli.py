"""The ``onyx`` command line."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from broker.errors import KafkaStartError, SetupError


def _cmd_demo(args: argparse.Namespace) -> int:
    from broker import demo

    return demo.run(generated=args.generated, corpus=args.corpus, timeout=args.timeout)


def _cmd_kafka(args: argparse.Namespace) -> int:
    from broker.devcluster import KafkaDevCluster

    kafka = KafkaDevCluster(name=args.name, port=args.port, controller_port=args.controller_port)
    kafka.start()
    print(f"Kafka (KRaft) listening on {kafka.bootstrap_servers}; data and log in {kafka.dir}; Ctrl-C stops it", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        kafka.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onyx",
        description="Onyx: content-based XML dissemination over Kafka and Spark.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="publish XML through Kafka and a Spark streaming query; print what came out")
    demo.add_argument("--generated", type=int, default=20, help="number of generated messages (default 20)")
    demo.add_argument("--corpus", type=Path, default=None, help="folder of XML files to publish too (default ../shared/corpus/news)")
    demo.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the output (default 180)")
    demo.set_defaults(func=_cmd_demo)

    kafka = sub.add_parser("kafka", help="run a local single-node Kafka broker (KRaft) until Ctrl-C")
    kafka.add_argument("--port", type=int, default=None, help="client port on 127.0.0.1 (default: a free one)")
    kafka.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: a free one)")
    kafka.add_argument("--name", default="cli", help="data folder .run/kafka-NAME (wiped at start)")
    kafka.set_defaults(func=_cmd_kafka)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SetupError, KafkaStartError) as exc:
        print(f"onyx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
