"""Schemathesis hooks for the registration service (loaded by ``schemathesis.toml``).

* Values for the description's custom string formats, grammars JSON Schema cannot state:
  ``onyx-profile`` (a profile's text: an XPath filter or a FLWR query),
  ``onyx-query`` (an ad-hoc query: an element path and one predicate), ``onyx-rule`` (a
  metadata subscription's rule), ``onyx-schema`` (a source's DTD or XML Schema) and
  ``onyx-webhook`` (a webhook URL whose host is a public address: the service refuses loopback
  and private ones). With them the requests the description
  calls valid are ones the service must accept, so the positive checks hold it to its
  word; the parsers' refusals are exercised by the negative cases and the unit tests.
* The tokens of the security schemes, as the requests' credentials, as each operation's rule
  (``x-onyx-access``) wants them: a subscriber's (registered with ``POST /subscribers``
  once per run) for its registrations and metadata subscriptions, the operator's (from
  ``ONYX_CONFORMANCE_ADMIN_TOKEN``) for the operator surfaces, the archive (every source's)
  and the sources' management, and a profile's (see :class:`ProfileToken`) for the
  operations on one profile. They are hooks rather than ``[auth]`` settings because
  schemathesis drops every hook's auth when the settings configure any, and a profile's
  token can only come from a hook.
"""

from __future__ import annotations

import json
import os
import urllib.request

from hypothesis import strategies as st

import schemathesis

NAMES = ("nitf", "head", "title", "body", "hl1", "p", "quote", "price", "tobject.subject")
_name = st.sampled_from(NAMES)
_value = st.text(alphabet="abcdefghijklmnopqrstuvwxyzSF0123456789 ", max_size=8)
_predicate = st.one_of(
    st.builds(lambda a, v: f"[@{a} = '{v}']", _name, _value),
    st.builds(lambda n, x: f"[{n} >= {x}]", _name, st.integers(0, 1000)),
    st.builds(lambda n: f"[{n}]", _name),
)
_step = st.builds(lambda axis, name, predicate: f"{axis}{name}{predicate}",
                  st.sampled_from(["/", "//"]), st.one_of(_name, st.just("*")), st.one_of(st.just(""), _predicate))
_filter = st.lists(_step, min_size=1, max_size=4).map("".join)
_query = st.builds(lambda path, name: f"for $n in $msg{path} return <r>{{$n/{name}}}</r>", _filter, _name)
PROFILES = st.one_of(_filter, _query)
"""Texts ``yfilter.validate`` accepts (``tests/broker/test_api_conformance.py`` checks a sample)."""

_column = st.one_of(st.builds("@{}".format, _name), _name, st.just("."))
_literal = st.one_of(st.builds("'{}'".format, _value), st.integers(-1000, 1000).map(str))
_selection = st.one_of(
    st.builds("{} {} {}".format, _column, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _literal),
    st.builds("contains({}, '{}')".format, _column, _value),
    _column,
)
_condition = st.recursive(_selection, lambda inner: st.one_of(
    st.builds("{} and {}".format, inner, inner), st.builds("({} or {})".format, inner, inner),
    st.builds("not({})".format, inner)), max_leaves=4)
QUERIES = st.builds(lambda path, condition: f"{path}[{condition}]" if condition else path,
                    st.sampled_from(["/nitf", "/nitf/head", "/nitf/head/pubdata", "$msg/nitf/body/p"]),
                    st.one_of(st.just(""), _condition))
"""Queries of ``POST /queries`` (an element path and one predicate) ``cache.split_query``
accepts (``tests/broker/test_api_conformance.py`` checks a sample)."""

_element = st.builds("<!ELEMENT {} (#PCDATA)>".format, _name)
_declaration = st.one_of(_element, st.builds("<!ATTLIST {} {} CDATA #IMPLIED>".format, _name, _name))
SCHEMAS = st.builds(lambda first, rest: " ".join([first, *rest]), _element, st.lists(_declaration, max_size=4))
"""DTDs a source may name (the test module checks a sample with the service's own check)."""

_path = st.sampled_from(["s.rate", "s.size", "s.name", "s.sourceId", "s.rootBroker.brokerId", "s.schema.kind",
                         "s.schema.declares?", "s.dictionary.version"])
_rule_predicate = st.one_of(
    st.builds("{} {} {}".format, _path, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
              st.integers(-1000, 1000).map(str)),
    st.builds("{} {} '{}'".format, _path, st.sampled_from(["=", "!=", "contains"]), _value))
RULES = st.builds(lambda preds, joiner: "search Source s register s" + (
    " where " + f" {joiner} ".join(preds) if preds else ""), st.lists(_rule_predicate, max_size=3),
    st.sampled_from(["and", "or"]))
"""Metadata subscription rules (MDV's language over the Onyx schema) the provider accepts
(``tests/broker/test_api_conformance.py`` checks a sample)."""

schemathesis.openapi.format("onyx-profile", PROFILES)
schemathesis.openapi.format("onyx-rule", RULES)
schemathesis.openapi.format("onyx-schema", SCHEMAS)
schemathesis.openapi.format("onyx-query", QUERIES)

# Public addresses (no DNS needed): documentation-like but globally routable, so the service's
# check of the host (broker.registry.webhooks.check_url) accepts them. No delivery is ever POSTed
# there: the service under test runs no brokers.
WEBHOOKS = st.builds("{}://{}/{}".format, st.sampled_from(["http", "https"]),
                     st.sampled_from(["93.184.215.14", "151.101.1.69", "[2606:4700::6810:85e5]"]),
                     st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-/", max_size=20))
"""Webhook URLs ``check_url`` accepts (``tests/broker/test_api_conformance.py`` checks a sample)."""
schemathesis.openapi.format("onyx-webhook", WEBHOOKS)

ADMIN_TOKEN_ENV = "ONYX_CONFORMANCE_ADMIN_TOKEN"


def _header(case: schemathesis.Case, name: str, value: str) -> None:
    case.headers = {**(case.headers or {}), name: value}


@schemathesis.auth().apply_to(path_regex="^/profiles(:batch|:changes)?$", method="POST").apply_to(
    path_regex="^/metadata/subscriptions")
class SubscriberToken:
    """One subscriber for the whole run (cached by schemathesis), registered through the
    service itself."""

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        url = case.operation.schema.get_base_url().rstrip("/") + "/subscribers"
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as answer:
            return json.loads(answer.read())["token"]

    def set(self, case: schemathesis.Case, data: str, context: schemathesis.AuthContext) -> None:
        _header(case, "X-Onyx-Subscriber-Token", data)


@schemathesis.auth().apply_to(
    path_regex="^/(rebalance|metrics|console/.+|cache|publishers|replay|queries|archive/.+|brokers|sources(/.*)?)$")
class AdminToken:
    """The operator token the service under test was started with (the operator endpoints,
    the console's data, the metrics, the archive of every source, the sources)."""

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        return os.environ[ADMIN_TOKEN_ENV]

    def set(self, case: schemathesis.Case, data: str, context: schemathesis.AuthContext) -> None:
        _header(case, "X-Onyx-Admin-Token", data)


@schemathesis.auth(refresh_interval=None).apply_to(
    path_regex="^/profiles/\\{profile_id\\}(/[a-z]+(/\\{message_id\\})?)?$")
class ProfileToken:
    """A profile's token, as the request carries it: the one the registration answered,
    which the description's links put in X-Onyx-Token (stateful phase), or else one no
    profile has (before any link is followed, and in the other phases). Declared as the
    request's credentials, so that schemathesis' ``ignored_auth`` check holds the service
    to refusing the same request without the token or with a wrong one (a token it did
    not configure itself it takes for an invented one, and expects 401 even when a link
    supplied the real one)."""

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        return (case.headers or {}).get("X-Onyx-Token") or "not-a-profile-token"

    def set(self, case: schemathesis.Case, data: str, context: schemathesis.AuthContext) -> None:
        _header(case, "X-Onyx-Token", data)
