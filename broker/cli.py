"""The ``onyx`` command line."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from broker import config
from broker.clients import ApiError
from broker.errors import KafkaStartError, SetupError
from routing.overlay import OverlayError
from routing.placement import STRATEGIES


def _say(line: str = "") -> None:
    print(line, flush=True)


def _cmd_demo(args: argparse.Namespace) -> int:
    from broker.local import demo

    return demo.run(profiles=args.profiles, messages=args.messages, corpus=args.corpus, timeout=args.timeout,
                    distributed=args.distributed)


def _overlay_settings(args: argparse.Namespace):
    from broker.local.cluster import OverlaySettings

    make = OverlaySettings.distributed if getattr(args, "distributed", False) else OverlaySettings
    return make(name="up", api_port=getattr(args, "port", None),
                trigger=getattr(args, "trigger", config.BROKER_TRIGGER),
                link_format=getattr(args, "link_format", "stream"),
                placement=getattr(args, "placement", config.PLACEMENT), fresh=getattr(args, "fresh", False),
                bootstrap_servers=getattr(args, "bootstrap_servers", None),
                archive=getattr(args, "archive", config.ARCHIVE), secure=getattr(args, "secure", False))


def _cmd_up(args: argparse.Namespace) -> int:
    from broker.local import up
    from broker.registry.serve import load_overlay

    overlay = load_overlay(args.overlay)  # checked here, so a bad config fails before anything starts
    if args.secure and args.bootstrap_servers:
        raise SetupError("--secure runs a Kafka of its own (its super user makes the overlay's users and ACLs): "
                         "drop --bootstrap-servers, or --secure")
    if args.detach:
        up.admin_token(_say)  # here, not in the background's log: a new token is shown once, on this terminal
        argv = [a for a in (args.argv or []) if a != "--detach"]
        timeout = args.timeout if args.timeout is not None else (
            config.DIST_START_TIMEOUT_S + 300 if args.distributed else 300.0)
        return up.up_detached(argv, _say, timeout=timeout)
    return up.up(overlay, _overlay_settings(args), _say)


def _cmd_kafka_user(args: argparse.Namespace) -> int:
    from broker.local import kafka_users, up

    info = up.require_cluster()
    user, rules = kafka_users.add_client_user(info, publisher=args.publisher, sources=args.source,
                                              subscriber=args.subscriber, claimed=args.topic)
    _say(f"Kafka user {user.username} on {info['bootstrap_servers']} (password kept in {info['kafka_users_file']}):")
    for rule in rules:
        _say(f"  {rule}")
    _say("a Kafka client logs in with:")
    _say(kafka_users.client_settings(info["bootstrap_servers"], user))
    return 0


def _cmd_reset(args: argparse.Namespace) -> int:
    from broker.local import up
    from broker.registry.serve import load_overlay

    ask = input if sys.stdin.isatty() else None
    return up.reset(load_overlay(args.overlay), _overlay_settings(args), _say, args.yes, ask)


def _cmd_down(args: argparse.Namespace) -> int:
    from broker.local import up

    return up.down(_say)


def _cmd_status(args: argparse.Namespace) -> int:
    from broker.local import up

    return up.status(_say)


def _endpoints(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(bootstrap servers, API URL): the options given, else the running overlay's."""
    bootstrap, api_url = getattr(args, "bootstrap_servers", None), getattr(args, "api", None)
    if bootstrap is None or (api_url is None and hasattr(args, "api")):
        from broker.local import up

        info = up.require_cluster()
        bootstrap = bootstrap or info["bootstrap_servers"]
        api_url = api_url or info["api_url"]
    return bootstrap, api_url


def _cmd_publish(args: argparse.Namespace) -> int:
    from broker import clients, topics

    if not args.paths and not args.generate:
        raise SetupError("nothing to publish: give files or folders of XML, or --generate N")
    bootstrap, _ = _endpoints(args)
    messages = list(clients.messages_from(args.paths, args.generate, args.seed))
    topic = topics.source_topic(args.source)
    start = time.monotonic()
    ids = clients.publish(bootstrap, topic, messages, rate=args.rate)
    elapsed = time.monotonic() - start
    _say(f"published {len(ids)} messages to {topic} in {elapsed:.1f}s ({len(ids) / max(elapsed, 1e-9):.0f} msg/s)")
    return 0


def _cmd_subscribe(args: argparse.Namespace) -> int:
    from broker import clients

    if (args.profile is None) == (args.file is None):
        raise SetupError("give one PROFILE, or --file FILE with one profile per line (not both)")
    if args.file is not None:
        return _subscribe_file(args)
    # Over the event stream only the service is needed: no Kafka address, no local overlay.
    bootstrap, api_url = (None, args.api) if args.sse and args.api else _endpoints(args)
    clients.subscribe(api_url, bootstrap, args.profile, _say, near=args.near, delivery_topic=args.delivery_topic,
                      subscriber_token=args.subscriber_token, count=args.count, timeout=args.timeout, keep=args.keep,
                      sse=args.sse, by_reference=args.by_reference)
    return 0


def _subscribe_file(args: argparse.Namespace) -> int:
    """``onyx subscribe --file``: register every line, report, keep them (exit 1 if a line failed)."""
    from broker import clients

    if args.count or args.timeout:
        raise SetupError("--count and --timeout follow the deliveries of one PROFILE; --file registers and stops")
    if not 1 <= args.batch_size <= clients.BATCH:
        raise SetupError(f"--batch-size is 1 to {clients.BATCH:,}, not {args.batch_size}")
    if args.file == "-":
        name, text = "<stdin>", sys.stdin.read()
    else:
        name, text = args.file, Path(args.file).read_text(encoding="utf-8")
    lines = clients.profile_lines(text.splitlines())
    if not lines:
        raise SetupError(f"{name} holds no profile (one per line; blank lines and # comments are skipped)")
    if args.api is None:
        from broker import up

        api_url = up.require_cluster()["api_url"]
    else:
        api_url = args.api
    done = clients.register_file(api_url, lines, near=args.near, delivery_topic=args.delivery_topic,
                                 subscriber_token=args.subscriber_token, batch=args.batch_size,
                                 progress=sys.stderr.isatty(), label=f"profiles from {name}")
    failed = done.failed
    registered = len(done.results) - len(failed)
    rate = len(done.results) / max(done.seconds, 1e-9)
    topics = sorted({r.profile["delivery_topic"] for r in done.results if r.profile})
    _say(f"registered {registered:,} of {len(lines):,} profiles from {name} in {done.seconds:.1f}s ({rate:,.0f}/s)"
         + (f" for subscriber {done.subscriber_id}; deliveries on {', '.join(topics)}" if registered else ""))
    if done.subscriber_token:
        _say(f"a new subscriber {done.subscriber_id}; its token (--subscriber-token or ONYX_SUBSCRIBER_TOKEN, to add "
             f"profiles to its delivery topic): {done.subscriber_token}")
    if args.results:
        with open(args.results, "w", encoding="utf-8") as out:
            for r in done.results:
                out.write(json.dumps({"line": r.line, "status": r.status, **(r.profile or {}),
                                      **({"error": r.error} if r.error else {})}) + "\n")
        _say(f"per-line results (profile ids and tokens, needed to update or delete them) in {args.results}")
    elif registered:
        _say("the profiles' own tokens (to update or delete one) were not kept: --results OUT keeps them")
    if failed:
        _say(f"{len(failed):,} lines refused:")
        for r in failed:
            for line in clients.describe_failure(name, r):
                _say(line)
        return 1
    return 0


def _api_url(args: argparse.Namespace) -> str:
    if args.api is not None:
        return args.api
    from broker.local import up

    return up.require_cluster()["api_url"]


def _time(text: str) -> int:
    from broker.time_travel_client import parse_time

    try:
        return parse_time(text)
    except ValueError as exc:
        raise SetupError(str(exc)) from None


def _cmd_replay(args: argparse.Namespace) -> int:
    from broker import time_travel_client as tt

    start, end = _time(args.start), _time(args.end)
    if start > end:
        raise SetupError(f"--from ({tt.show_time(start)}) is after --to ({tt.show_time(end)})")
    tt.replay(_api_url(args), args.profile, start, end, _say, source=args.source, show=args.show)
    return 0


def _cmd_archive(args: argparse.Namespace) -> int:
    from broker import time_travel_client as tt

    url = _api_url(args)
    what = args.archive_command
    if what == "messages":
        if (args.path is None) != (args.value is None):
            raise SetupError("give --path and --value together (or neither)")
        return tt.messages_at(url, _time(args.at), args.path, args.value, _say)
    if what == "message":
        return tt.message(url, args.message_id, _say)
    if what == "recipients":
        return tt.recipients(url, args.message_id, _say)
    if what == "history":
        return tt.history(url, args.profile_id, _say)
    return tt.active(url, _time(args.at), _say)


def _cmd_query(args: argparse.Namespace) -> int:
    from broker import query_client

    start = None if args.start is None else _time(args.start)
    end = None if args.end is None else _time(args.end)
    query_client.query(_api_url(args), args.source, args.xpath, _say, start=start, end=end, show=args.show,
                       as_json=args.json)
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    from broker import query_client

    return query_client.show_cache(_api_url(args), _say)


def _cmd_backfill(args: argparse.Namespace) -> int:
    from broker import time_travel_client as tt

    if not args.token:
        raise SetupError("backfill needs the profile's token: --token or ONYX_PROFILE_TOKEN")
    return tt.backfill(_api_url(args), args.profile_id, args.token, _time(args.since), _say)


def _cmd_metadata(args: argparse.Namespace) -> int:
    from broker.metadata import client

    bootstrap, api_url = _endpoints(args)
    if args.metadata_command == "query":
        return client.query(bootstrap, args.broker, args.rule, _say, show=args.show)
    if (args.rule is None) == (args.subscription is None):
        raise SetupError("give a RULE to subscribe by, or --subscription ID --topic TOPIC to follow one (not both)")
    if args.subscription is not None and args.topic is None:
        raise SetupError("--subscription needs the --topic its changes go to")
    client.watch(api_url, bootstrap, _say, rule=args.rule, subscription=args.subscription, topic=args.topic,
                 subscriber_token=args.subscriber_token, count=args.count, timeout=args.timeout)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from broker.local.devcluster import check_port_free
    from broker.registry.serve import ServiceSettings, load_overlay, serve

    if args.host in ("127.0.0.1", "localhost"):
        check_port_free(args.port)
    settings = ServiceSettings(args.bootstrap_servers, load_overlay(args.overlay), args.database,
                               args.host, args.port, args.placement)
    print(f"Onyx registration service on http://{args.host}:{args.port} (OpenAPI at /openapi.json, docs at /docs); "
          f"database {args.database}; Kafka {args.bootstrap_servers}", flush=True)
    serve(settings)
    return 0


def _cmd_kafka(args: argparse.Namespace) -> int:
    from broker.local.devcluster import KafkaDevCluster

    kafka = KafkaDevCluster(name=args.name, port=args.port, controller_port=args.controller_port, secure=args.secure)
    kafka.start()
    print(f"Kafka (KRaft) listening on {kafka.bootstrap_servers}; data and log in {kafka.dir}; Ctrl-C stops it", flush=True)
    if kafka.secure:
        print(f"SASL {config.KAFKA_SASL_MECHANISM} and ACLs: super user {kafka.super_user.username}, its password in "
              f"{kafka.secrets_file} (mode 0600)", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        kafka.stop()
    return 0


def _cmd_deploy_render(args: argparse.Namespace) -> int:
    from broker.deploy import render as deploy_render
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

    demo = sub.add_parser("demo", help="the six-broker overlay of ONYX Figure 4 end to end (what `make run` runs)",
                          description="Start the six-broker overlay of ONYX Figure 4 (Kafka, registration "
                          "service, six brokers as Spark streaming queries), register Q1-Q3 and generated profiles "
                          "over HTTP, publish generated NITF messages and the news corpus, compare every "
                          "subscriber's deliveries with a centralized engine, print a summary and stop. "
                          "Exit status 0 only if they agree exactly.")
    demo.add_argument("--profiles", type=int, default=2000, help="generated profiles besides Q1-Q3 (default 2000)")
    demo.add_argument("--messages", type=int, default=200, help="generated NITF messages (default 200)")
    demo.add_argument("--corpus", type=Path, default=None,
                      help=f"folder of XML files to publish too (default {config.CORPUS_DIR}, if present)")
    demo.add_argument("--timeout", type=float, default=300.0, help="seconds to wait at each stage (default 300)")
    demo.add_argument("--distributed", action="store_true",
                      help="the same demo on `onyx up --distributed`'s overlay: a 3-node Kafka cluster and a Spark "
                           "standalone cluster, every broker a Spark application of its own")
    demo.set_defaults(func=_cmd_demo)

    up = sub.add_parser("up", help="run a local overlay: Kafka, registration service, brokers as streaming queries",
                        description="Start Kafka, the registration service and every broker of the overlay (one "
                        "Spark application, one streaming query serving every broker) and keep them running until Ctrl-C or "
                        "`onyx down`. Writes .run/cluster.json (bootstrap_servers, api_url, source_topic, ...) "
                        "for scripts and other Kafka clients. Closed by default: the operator surfaces (console, "
                        "metrics, rebalance, brokers) need the operator token, ONYX_ADMIN_TOKEN if set, else one "
                        f"generated once into {config.ADMIN_TOKEN_FILE} (mode 0600, printed by the run that made "
                        "it); the onyx commands send it to the local overlay. It resumes what the last `onyx up` left: sources, "
                        "profiles, Kafka's topics and records, the brokers' state and progress (kept in "
                        f"{config.RUN_DIR}/overlay-up and {config.RUN_DIR}/kafka-overlay-up); --fresh or "
                        "`onyx reset` starts from nothing.")
    up.add_argument("--overlay", type=Path, default=None, help="overlay config (default: the six brokers of ONYX Figure 4)")
    up.add_argument("--detach", action="store_true", help="run in the background; return once everything is ready")
    up.add_argument("--port", type=int, default=None, help="port of the registration service (default: a free one)")
    up.add_argument("--trigger", default=config.BROKER_TRIGGER,
                    help=f"micro-batch interval of the brokers (default {config.BROKER_TRIGGER!r}: "
                         "the next batch starts as soon as one ends)")
    up.add_argument("--link-format", default="stream",
                    help="wire format between brokers (default stream; see `formats.available()`)")
    up.add_argument("--placement", default=config.PLACEMENT, choices=sorted(STRATEGIES),
                    help=f"host broker choice of the registration service (default {config.PLACEMENT})")
    up.add_argument("--timeout", type=float, default=None,
                    help="with --detach: seconds to wait for readiness (default 300; with --distributed "
                         f"{config.DIST_START_TIMEOUT_S + 300:.0f})")
    up.add_argument("--distributed", action="store_true",
                    help="a Kafka cluster of 3 KRaft nodes (replication factor 3, min.insync.replicas 2) and a "
                         "Spark standalone cluster (a master, 2 workers) on loopback, every broker submitted to it "
                         "as a Spark application of its own (`python broker/job.py`, as the Helm chart runs it); "
                         "everything under the run folder's overlay-up/")
    up.add_argument("--bootstrap-servers", default=None, metavar="HOST:PORT",
                    help="use this Kafka (its topics are the overlay's; they outlive the overlay) instead of "
                         "starting one")
    up.add_argument("--fresh", action="store_true",
                    help="start from nothing: delete the sources, profiles, topics and broker state kept from "
                         "the last run (default: resume them; a Kafka given with --bootstrap-servers is left alone)")
    up.add_argument("--secure", action="store_true",
                    help="a Kafka that trusts nobody, as the Helm chart's: SASL/SCRAM on its listeners and Kafka's "
                         "standard authorizer allowing only what an ACL allows; the registration service, the archive "
                         "writer, every broker application and the status loop log in as Kafka users of their own "
                         "with the ACLs the chart's KafkaUsers hold (broker/deploy/acls.py), passwords kept in the run "
                         "folder's overlay-up/kafka-users.json (mode 0600). Publishers and subscribers need users "
                         "too: `onyx kafka-user add`")
    up.add_argument("--no-archive", dest="archive", action="store_false", default=config.ARCHIVE,
                    help="do not run the archive writer (default: every source message and profile change is "
                         "archived in the run folder's overlay-up/archive, for `onyx replay` and `onyx archive`; "
                         "ONYX_ARCHIVE=0 turns it off too)")
    up.set_defaults(func=_cmd_up)

    kafka_user = sub.add_parser("kafka-user", help="Kafka users of publishers and subscribers on `onyx up --secure`",
                                description="Kafka users of the secure local overlay (`onyx up --secure`) for "
                                "publishers and subscribers, with the ACLs the Helm chart gives them "
                                "(security.publishers, security.subscribers).")
    kafka_user_sub = kafka_user.add_subparsers(dest="kafka_user_command", required=True, metavar="SUBCOMMAND")
    ku_add = kafka_user_sub.add_parser(
        "add", help="make (or update) a publisher's or a subscriber's Kafka user; print its SASL settings",
        description="Make, or bring up to date, the Kafka user of a publisher (onyx-pub-NAME: writes onyx.src.<S> "
        "of each --source, nothing else) or of a subscriber (onyx-sub-ID: reads onyx.deliver.ID, the topics "
        "onyx.deliver.ID.*, each --topic it claimed, with consumer groups whose names start with ID), then print "
        "what a Kafka client needs to log in as it. Its password is generated once and kept with the overlay's "
        "users' (the run folder's overlay-up/kafka-users.json, mode 0600); running it again keeps the password "
        "and makes the user's ACLs exactly the ones printed.",
        epilog="examples:\n  onyx kafka-user add --publisher wire --source news\n"
               "  onyx kafka-user add --subscriber s3f2a9c0d1e4b5a6f --topic alerts.sf",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    who = ku_add.add_mutually_exclusive_group(required=True)
    who.add_argument("--publisher", metavar="NAME", help="a publisher's user, onyx-pub-NAME")
    who.add_argument("--subscriber", metavar="ID", help="a subscriber's user, onyx-sub-ID (ID: the subscriber_id "
                     "the registration returned)")
    ku_add.add_argument("--source", action="append", default=[], metavar="S",
                        help="with --publisher: a source it writes (repeatable; default: every source of the "
                             "overlay config)")
    ku_add.add_argument("--topic", action="append", default=[], metavar="T",
                        help="with --subscriber: another delivery topic it claimed and reads (repeatable)")
    kafka_user.set_defaults(func=_cmd_kafka_user)

    reset = sub.add_parser("reset", help="delete what `onyx up` keeps between runs (asks first)",
                           description="Delete the local overlay's data: registered sources and profiles, Kafka's "
                           "topics and records, the brokers' state and progress. Asks for confirmation on a "
                           "terminal; --yes skips the question (needed without a terminal). Refused while the "
                           "overlay runs.")
    reset.add_argument("--overlay", type=Path, default=None, help="overlay config (default: ONYX Figure 4's)")
    reset.add_argument("--yes", action="store_true", help="do not ask")
    reset.set_defaults(func=_cmd_reset)

    down = sub.add_parser("down", help="stop the overlay started by `onyx up`")
    down.set_defaults(func=_cmd_down)

    status = sub.add_parser("status", help="per broker: lag, messages in/out, profiles, routing-table size")
    status.set_defaults(func=_cmd_status)

    publish = sub.add_parser("publish", help="publish XML files, folders or generated NITF messages to a source",
                             description="Publish text XML to onyx.src.<source> with a Kafka producer (each "
                             "message gets an onyx-message-id header). Defaults come from the running `onyx up`.")
    publish.add_argument("paths", type=Path, nargs="*", help="XML files or folders of *.xml")
    publish.add_argument("--generate", type=int, default=0, metavar="N", help="also publish N generated NITF messages")
    publish.add_argument("--rate", type=float, default=0.0, help="messages per second (default: as fast as possible)")
    publish.add_argument("--source", default="news", help="source id (default news, the source of the default overlay)")
    publish.add_argument("--seed", type=int, default=1, help="seed of the generator (default 1)")
    publish.add_argument("--bootstrap-servers", default=None, help="Kafka (default: the running `onyx up`)")
    publish.set_defaults(func=_cmd_publish)

    subscribe = sub.add_parser("subscribe", help="register a profile and print its deliveries as they arrive, "
                               "or register a file of profiles",
                               description="Register PROFILE (an XPath filter or a FLWR query) with the "
                               "registration service and print\nevery delivery until Ctrl-C, --count or --timeout; "
                               "the profile is deleted at the end unless --keep.\n\n"
                               "With --file FILE instead, register every profile of FILE: one per line, blank lines "
                               "and\nlines starting with # skipped, up to 10,000 per request (POST /profiles:batch), "
                               "all for\none subscriber (--subscriber-token's, or a new one whose token is printed). "
                               "Shows progress\non a terminal, prints a summary and every refused line as "
                               "FILE:LINE: reason (with a caret\nunder the column of a syntax error), keeps the "
                               "registered profiles and stops. Exit status 1\nif any line was refused, 2 if a whole "
                               "request was (Kafka down, say; the batches before it\nstay registered).",
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog="examples:\n"
                               "  onyx subscribe \"/nitf[head/pubdata/@edition.area='SF']\" --near b5\n"
                               "  onyx subscribe --file profiles.txt --subscriber-token $ONYX_SUBSCRIBER_TOKEN "
                               "--results registered.jsonl")
    subscribe.add_argument("profile", nargs="?", default=None,
                           help="the profile text, e.g. \"/nitf[head/pubdata/@edition.area='SF']\"")
    subscribe.add_argument("--file", default=None, metavar="FILE",
                           help="register the profiles of FILE, one per line ('-': standard input), and stop")
    subscribe.add_argument("--batch-size", type=int, default=10_000, metavar="N",
                           help="with --file: profiles per request (1-10000, default 10000)")
    subscribe.add_argument("--results", default=None, metavar="OUT",
                           help="with --file: write one JSON line per profile line to OUT (line, status, and "
                           "profile_id, token, host_broker, delivery_topic or error)")
    subscribe.add_argument("--near", default=None, help="broker you are near (placement hint)")
    subscribe.add_argument("--delivery-topic", default=None,
                           help="deliver to this topic, which becomes yours (outside onyx.*; default: your "
                           "subscriber's own onyx.deliver.<subscriber id>)")
    subscribe.add_argument("--subscriber-token", default=os.environ.get("ONYX_SUBSCRIBER_TOKEN"),
                           help="register for this subscriber (default $ONYX_SUBSCRIBER_TOKEN; unset: a new "
                           "subscriber, printed with --keep)")
    subscribe.add_argument("--sse", action="store_true", help="read the deliveries from the registration service's "
                           "event stream (GET /profiles/{id}/deliveries) instead of Kafka")
    subscribe.add_argument("--by-reference", action="store_true", help="deliveries carry a reference to the message "
                           "(delivery.by reference), which is fetched from the service's archive "
                           "(GET /profiles/{id}/messages/{message id}) and printed")
    subscribe.add_argument("--count", type=int, default=0, help="stop after N deliveries")
    subscribe.add_argument("--timeout", type=float, default=0.0, help="stop after S seconds")
    subscribe.add_argument("--keep", action="store_true", help="keep the profile registered (prints its token)")
    subscribe.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    subscribe.add_argument("--bootstrap-servers", default=None, help="Kafka (default: the running `onyx up`)")
    subscribe.set_defaults(func=_cmd_subscribe)

    times = ("TIME is milliseconds since 1970, an ISO date-time (UTC unless it says otherwise, e.g. "
             "2026-11-26T10:00:00Z), 'now', or an offset from now: -90s, -30m, -1h, -2d.")
    replay = sub.add_parser("replay", help="what a profile would have matched in a past time window (the archive)",
                            description="Replay PROFILE (a registered profile's id, or a profile text) over the "
                            "messages archived between --from and --to: candidates come from the archive's value "
                            "index for the profile's equality predicates (the whole window is scanned when it has "
                            "none), each verified by the engine. Prints a line per match (time, message id, "
                            "source:partition@offset; --show adds the XML or the FLWR results), a progress bar on a "
                            "terminal, and a summary. " + times,
                            epilog="example:\n  onyx replay \"/nitf[head/pubdata/@edition.area='SF']\" --from -1h "
                            "--to now --show", formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("profile", help="a profile id, or an XPath filter / FLWR query")
    replay.add_argument("--from", dest="start", required=True, metavar="TIME", help="the window's start (inclusive)")
    replay.add_argument("--to", dest="end", default="now", metavar="TIME", help="the window's end (default now)")
    replay.add_argument("--source", default=None, help="only this source's messages (default: every source)")
    replay.add_argument("--show", action="store_true", help="print each match's XML (or FLWR results)")
    replay.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    replay.set_defaults(func=_cmd_replay)

    archive = sub.add_parser("archive", help="ask the archive: messages at a time, a message, its recipients, "
                             "a profile's history, the profiles active at a time",
                             description="Questions to the time-travel archive that `onyx up` keeps. " + times)
    archive.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    archive_sub = archive.add_subparsers(dest="archive_command", required=True, metavar="SUBCOMMAND")
    a_msgs = archive_sub.add_parser("messages", help="the messages in the archive at a time (optionally where a "
                                    "path had a value)")
    a_msgs.add_argument("--at", default="now", metavar="TIME", help="the time (default now)")
    a_msgs.add_argument("--path", default=None, help="an element or attribute path, e.g. /nitf/head/pubdata/@edition.area")
    a_msgs.add_argument("--value", default=None, help="the value the path had")
    a_msg = archive_sub.add_parser("message", help="print an archived message")
    a_msg.add_argument("message_id")
    a_rcpt = archive_sub.add_parser("recipients", help="who received a message (the profiles active then that match it)")
    a_rcpt.add_argument("message_id")
    a_hist = archive_sub.add_parser("history", help="every version of a profile (from, to, text)")
    a_hist.add_argument("profile_id")
    a_act = archive_sub.add_parser("profiles", help="the profiles active at a time")
    a_act.add_argument("--at", default="now", metavar="TIME", help="the time (default now)")
    archive.set_defaults(func=_cmd_archive)

    backfill = sub.add_parser("backfill", help="deliver a profile's archived matches since a time, up to where its "
                              "live deliveries start",
                              description="Ask the service to deliver, on the profile's delivery topic, the archived "
                              "messages since --since that the profile matches (header onyx-backfill: 1), up to the "
                              "seam where its live deliveries start; a message on both sides of the seam arrives "
                              "twice with the same onyx-message-id. " + times)
    backfill.add_argument("profile_id")
    backfill.add_argument("--since", required=True, metavar="TIME", help="deliver matches archived from this time")
    backfill.add_argument("--token", default=os.environ.get("ONYX_PROFILE_TOKEN"),
                          help="the profile's token (default $ONYX_PROFILE_TOKEN)")
    backfill.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    backfill.set_defaults(func=_cmd_backfill)

    query = sub.add_parser("query", help="ad-hoc query over a source's recent messages, through the semantic cache",
                           description="Ask the query service for the messages of SOURCE archived between --from "
                           "and --to that have an element XPATH selects: XPATH is an element path and one predicate "
                           "over that element (comparisons with literals, contains(), existence, and/or/not()). "
                           "The service answers what earlier queries already fetched from its semantic cache and "
                           "asks the archive only for the rest (the remainder), which it keeps for the next "
                           "queries. Prints a line per message (id, 'cache' or 'source', the XML on one line; "
                           "--show: whole), then 'N items: K from the cache, M from the source; remainder: ...'. "
                           "The window ends at the archive's settled time at the latest (the last time no message "
                           "can still be archived at), and lasts an hour by default. " + times,
                           epilog="examples:\n  onyx query news \"/nitf/head/pubdata[@edition.area = 'SF']\" "
                           "--from -10m\n  onyx query news \"/nitf/head/pubdata[@edition.area = 'SF' and "
                           "@position.sequence <= 3]\" --from -10m   # narrowed: from the cache\n  onyx cache",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    query.add_argument("source", help="the source id, e.g. news")
    query.add_argument("xpath", help="an element path and one predicate, e.g. "
                       "\"/nitf/head/pubdata[@edition.area = 'SF']\"")
    query.add_argument("--from", dest="start", default=None, metavar="TIME",
                       help="the window's start (default: an hour before its end)")
    query.add_argument("--to", dest="end", default=None, metavar="TIME",
                       help="the window's end (default, and at most: the archive's settled time)")
    query.add_argument("--show", action="store_true", help="print each message's whole XML")
    query.add_argument("--json", action="store_true", help="print the service's JSON lines as they come")
    query.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    query.set_defaults(func=_cmd_query)

    cache = sub.add_parser("cache", help="the query service's semantic cache: statistics and regions",
                           description="Print GET /cache: one line of statistics, then per source its counters "
                           "and its regions (concept[condition], items, bytes, window, last use).")
    cache.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
    cache.set_defaults(func=_cmd_cache)

    rules = ("A RULE is MDV's rule language over Onyx's metadata schema: search CLASS v[, CLASS w] register v "
             "where PREDICATES, with paths (s.schema.declares?), = != < <= > >= contains, and, or. Classes: Broker "
             "(brokerId), Link (tree, parent, child), Source (sourceId, name, topic, rate, size, rootBroker, schema, "
             "dictionary), Schema (kind, sha256, bytes, declares?), Dictionary (version, entry?), Profile "
             "(profileId, profileVersion, hostBroker).")
    metadata = sub.add_parser("metadata", help="the overlay's metadata (MDV): watch changes by a rule, query a "
                              "broker's repository", description="Onyx's catalog is MDV's publish & subscribe: "
                              "brokers, links, sources with their schemas and dictionaries, and profiles are RDF "
                              "resources at the registration service; every broker's repository holds what its "
                              "rules select. " + rules,
                              epilog="examples:\n  onyx metadata watch \"search Source s register s where "
                              "s.rate > 100\"\n  onyx metadata query --broker b3 \"search Profile p register p "
                              "where p.hostBroker.brokerId = 'b3'\"",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    metadata_sub = metadata.add_subparsers(dest="metadata_command", required=True, metavar="COMMAND")
    m_watch = metadata_sub.add_parser("watch", help="subscribe by a rule and print every change as it comes",
                                      description="Subscribe by RULE (POST /metadata/subscriptions) and print what "
                                      "it registers now, then every change: '+ uri' now matches, '- uri' no longer "
                                      "does, '~ uri' changed, 'x uri' deleted, each with its class and properties. "
                                      "Or follow an existing subscription with --subscription and --topic. " + rules)
    m_watch.add_argument("rule", nargs="?", default=None, help="e.g. \"search Source s register s where s.rate > 100\"")
    m_watch.add_argument("--subscription", default=None, help="follow this subscription instead of making one")
    m_watch.add_argument("--topic", default=None, help="the topic the changes go to (default: your subscriber's "
                         "own delivery topic; needed with --subscription)")
    m_watch.add_argument("--subscriber-token", default=os.environ.get("ONYX_SUBSCRIBER_TOKEN"),
                         help="subscribe for this subscriber (default $ONYX_SUBSCRIBER_TOKEN; unset: a new one)")
    m_watch.add_argument("--count", type=int, default=0, help="stop after N change records")
    m_watch.add_argument("--timeout", type=float, default=0.0, help="stop after S seconds")
    m_query = metadata_sub.add_parser("query", help="evaluate a rule at a broker's metadata repository",
                                      description="Evaluate RULE on what broker --broker's Local Metadata "
                                      "Repository holds (rebuilt from the broker's state log, as the broker "
                                      "rebuilds it) and print the URI references it registers. " + rules)
    m_query.add_argument("rule", help="e.g. \"search Source s register s where s.rootBroker.brokerId = 'b1'\"")
    m_query.add_argument("--broker", required=True, help="whose repository, e.g. b3")
    m_query.add_argument("--show", action="store_true", help="print each resource's properties too")
    for p in (m_watch, m_query):
        p.add_argument("--api", default=None, help="registration service URL (default: the running `onyx up`)")
        p.add_argument("--bootstrap-servers", default=None, help="Kafka (default: the running `onyx up`)")
    metadata.set_defaults(func=_cmd_metadata)

    kafka = sub.add_parser("kafka", help="run a local single-node Kafka broker (KRaft) until Ctrl-C")
    kafka.add_argument("--port", type=int, default=None, help="client port on 127.0.0.1 (default: a free one)")
    kafka.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: a free one)")
    kafka.add_argument("--name", default="cli", help="data folder .run/kafka-NAME (wiped at start)")
    kafka.add_argument("--secure", action="store_true", help="SASL/SCRAM on its listeners and Kafka's standard "
                       "authorizer (nothing allowed without an ACL); a super user whose password is generated into "
                       "the data folder's secrets.json (mode 0600)")
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
    serve.add_argument("--placement", default=config.PLACEMENT, choices=sorted(STRATEGIES),
                       help=f"host broker choice (default {config.PLACEMENT})")
    serve.set_defaults(func=_cmd_serve)

    deploy = sub.add_parser("deploy", help="Kubernetes deployment: render the Helm chart for an overlay")
    deploy_sub = deploy.add_subparsers(dest="deploy_command", required=True, metavar="SUBCOMMAND")
    render = deploy_sub.add_parser(
        "render",
        help="print the Kubernetes manifests (Strimzi Kafka + topics, Spark brokers and archive writer, registration "
        "service) for an overlay",
        description="Render deploy/helm/onyx for an overlay config with `helm template`: one KafkaTopic per topic "
        "the overlay needs, one SparkApplication per broker and one for the archive writer (with its volume), the "
        "registration service and the overlay ConfigMap. "
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


_TIME_OPTIONS = ("--from", "--to", "--at", "--since")
_OFFSET = re.compile(r"^-\d+(?:\.\d+)?[smhd]$")


def _offsets_attached(argv: list[str]) -> list[str]:
    """``--from -1h`` as ``--from=-1h``: argparse takes a value starting with '-' for an option.

    >>> _offsets_attached(["replay", "/a", "--from", "-1h", "--to", "now"])
    ['replay', '/a', '--from=-1h', '--to', 'now']
    """
    out: list[str] = []
    for a in argv:
        if out and out[-1] in _TIME_OPTIONS and _OFFSET.match(a):
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = _offsets_attached(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv[1:] if argv and argv[0] == "up" else None
    try:
        return args.func(args)
    except (SetupError, KafkaStartError, OverlayError, ApiError, FileNotFoundError) as exc:
        print(f"onyx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
