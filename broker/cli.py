"""The ``onyx`` command line."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from broker import config
from broker.errors import KafkaStartError, SetupError
from routing.overlay import OverlayError


def _cmd_demo(args: argparse.Namespace) -> int:
    from broker import demo

    return demo.run(generated=args.generated, corpus=args.corpus, timeout=args.timeout)


def _cmd_serve(args: argparse.Namespace) -> int:
    from broker.devcluster import check_port_free
    from broker.serve import ServiceSettings, load_overlay, serve

    if args.host in ("127.0.0.1", "localhost"):
        check_port_free(args.port)
    settings = ServiceSettings(args.bootstrap_servers, load_overlay(args.overlay), args.database,
                               args.host, args.port, args.placement)
    print(f"Onyx registration service on http://{args.host}:{args.port} (OpenAPI at /openapi.json, docs at /docs); "
          f"database {args.database}; Kafka {args.bootstrap_servers}", flush=True)
    serve(settings)
    return 0


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


def _cmd_deploy_render(args: argparse.Namespace) -> int:
    from broker import deploy_render
    from routing.overlay import Overlay, OverlayError, builtin

    try:
        overlay = Overlay.load(args.overlay) if args.overlay else builtin("figure4")
        if args.values_only:
            text = deploy_render.values_yaml(overlay)
        else:
            text = deploy_render.render(
                overlay, args.values, args.set, release=args.release, namespace=args.namespace, helm=args.helm
            )
    except (OverlayError, deploy_render.DeployError) as exc:
        print(f"onyx: error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
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

    serve = sub.add_parser("serve", help="run the HTTP registration service (sources and profiles)",
                           description="Serve the registration API of DESIGN.md section 4: POST /sources, "
                           "POST/PUT/DELETE/GET /profiles, GET /brokers, GET /health; OpenAPI at /openapi.json.")
    serve.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers, e.g. 127.0.0.1:9092")
    serve.add_argument("--overlay", type=Path, default=None, help="overlay config (default: the built-in figure4)")
    serve.add_argument("--database", default=config.DATABASE_URL,
                       help=f"SQLAlchemy URL of the database (default {config.DATABASE_URL})")
    serve.add_argument("--host", default=config.API_HOST, help=f"bind address (default {config.API_HOST})")
    serve.add_argument("--port", type=int, default=config.API_PORT, help=f"port (default {config.API_PORT})")
    serve.add_argument("--placement", default=config.PLACEMENT,
                       help=f"host broker choice: round-robin or nearest (default {config.PLACEMENT})")
    serve.set_defaults(func=_cmd_serve)

    deploy = sub.add_parser("deploy", help="Kubernetes deployment: render the Helm chart for an overlay")
    deploy_sub = deploy.add_subparsers(dest="deploy_command", required=True, metavar="SUBCOMMAND")
    render = deploy_sub.add_parser(
        "render",
        help="print the Kubernetes manifests (Strimzi Kafka + topics, Spark brokers, registration service) for an overlay",
        description="Render deploy/helm/onyx for an overlay config with `helm template`: one KafkaTopic per topic "
        "the overlay needs, one SparkApplication per broker, the registration service and the overlay ConfigMap. "
        "Pipe the output to `kubectl apply -f -`, or use --values-only to get a values file for `helm install -f`.",
    )
    render.add_argument("--overlay", type=Path, default=None,
                        help="overlay config (YAML/JSON: brokers, links, sources); default: the built-in figure4 overlay")
    render.add_argument("-f", "--values", type=Path, action="append", default=[], metavar="FILE",
                        help="extra Helm values file (image, Kafka size, resources, ...); repeatable")
    render.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Helm value, as with `helm --set`; repeatable")
    render.add_argument("--release", default="onyx", help="Helm release name, prefix of object names (default onyx)")
    render.add_argument("--namespace", default=None, help="namespace written into the manifests (default: none)")
    render.add_argument("--values-only", action="store_true",
                        help="print only the generated overlay values (no helm needed), for `helm install -f`")
    render.add_argument("-o", "--output", type=Path, default=None, help="write to FILE instead of standard output")
    render.add_argument("--helm", default=None,
                        help="helm binary (default: $ONYX_HELM, .tools/bin/helm from `make k8s-tools`, or helm on PATH)")
    render.set_defaults(func=_cmd_deploy_render)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SetupError, KafkaStartError, OverlayError) as exc:
        print(f"onyx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
