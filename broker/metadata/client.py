"""``onyx metadata``: MDV's publish & subscribe from the command line.

* ``watch``: subscribe by a rule (``POST /metadata/subscriptions``, or follow an existing
  subscription) and print every change as it arrives on the subscription's topic;
* ``query``: evaluate a rule at a broker's Local Metadata Repository — rebuilt here, as the
  broker rebuilds it after a restart, from the ``catalog`` packets of the broker's state log.

>>> lines = describe({"subscription_id": "s1", "upserts": {"urn:onyx:sources:news#source": {
...     "class": "Source", "properties": {"name": ["News"], "rate": ["50"]}}}, "deleted": [],
...     "matched": ["urn:onyx:sources:news#source"], "unmatched": []})
>>> print("\\n".join(lines))
+ urn:onyx:sources:news#source (matches)
    Source name=News rate=50
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from broker import topics
from broker.clients import TopicTail, api
from broker.compacted import read_to_end
from broker.metadata.broker_lmr import BrokerRepository

Say = Callable[[str], None]


def describe(change: dict) -> list[str]:
    """A change record of a subscription as lines: ``+ uri`` for a resource that now matches,
    ``- uri`` for one that no longer does, ``~ uri`` for one that changed (or came along by a
    strong reference), ``x uri`` for one deleted; each with its class and properties."""
    out: list[str] = []
    matched, unmatched = set(change["matched"]), set(change["unmatched"])
    for uri in sorted(set(change["upserts"]) | matched | unmatched | set(change["deleted"])):
        mark = ("+ " + uri + " (matches)" if uri in matched else "- " + uri + " (no longer matches)"
                if uri in unmatched else "x " + uri + " (deleted)" if uri in change["deleted"] else "~ " + uri)
        out.append(mark)
        res = change["upserts"].get(uri)
        if res is not None:
            props = " ".join(f"{k}={','.join(v)}" for k, v in sorted(res["properties"].items()))
            out.append(f"    {res['class']} {props}"[:400])
    return out


def watch(api_url: str, bootstrap: str, say: Say, *, rule: str | None = None, subscription: str | None = None,
          topic: str | None = None, subscriber_token: str | None = None, count: int = 0,
          timeout: float = 0.0) -> int:
    """Subscribe by ``rule`` (or follow ``subscription`` on ``topic``) and print its changes
    until ``count`` change records or ``timeout`` seconds (0: until Ctrl-C); returns how many."""
    if rule is not None:
        body = {"rule": rule, **({"topic": topic} if topic else {})}
        reg = api("POST", f"{api_url}/metadata/subscriptions", body, subscriber_token=subscriber_token)
        subscription, topic = reg["subscription_id"], reg["topic"]
        say(f"metadata subscription {subscription}; changes on {topic} (key metadata:{subscription})")
        if reg.get("subscriber_token"):
            say(f"a new subscriber {reg['subscriber_id']}; its token (to end the subscription): "
                f"{reg['subscriber_token']}")
    key = f"metadata:{subscription}".encode()
    reader = TopicTail(bootstrap, [topic], from_start=True)  # the records of this subscription only, below
    seen = 0
    deadline = time.monotonic() + timeout if timeout else None
    try:
        while (not count or seen < count) and (deadline is None or time.monotonic() < deadline):
            for r in reader:
                if r.key != key:
                    continue
                seen += 1
                say(f"[{time.strftime('%H:%M:%S')}] change {seen}:")
                for line in describe(json.loads(r.value)):
                    say(line)
                if count and seen >= count:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        reader.close()
    return seen


def repository(bootstrap: str, broker: str, timeout_s: float = 60.0) -> BrokerRepository:
    """Broker ``broker``'s repository as its state log makes it."""
    repo = BrokerRepository(broker)
    for msg in read_to_end(bootstrap, topics.state_topic(broker), timeout_s):
        if dict(msg.headers() or ()).get("onyx-flow") == b"catalog" and msg.value():
            repo.apply(json.loads(msg.value()))
    return repo


def query(bootstrap: str, broker: str, rule: str, say: Say, *, show: bool = False) -> int:
    """Print what ``rule`` registers at ``broker``'s repository (``show``: with properties)."""
    repo = repository(bootstrap, broker)
    found = sorted(repo.query(rule))
    held = repo.resources() if show else {}
    for uri in found:
        say(uri)
        if show:
            say("    " + " ".join(f"{k}={','.join(v)}" for k, v in held.get(uri, {}).items())[:400])
    say(f"{len(found)} resources at broker {broker}'s repository (it holds {len(repo.resources())})")
    return 0
