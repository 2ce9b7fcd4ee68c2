"""The filter algorithm in SQL (paper section 3.4): matching documents and rules.

Step 1 joins the ``FilterData`` rows of the run's input resources (``FilterInput``) with
``FilterRules`` and every ``FilterRules_*`` table; the pairs (resource, triggering rule) go into
``ResultObjects`` as iteration 0. Step 2, the join phase, iterates: the rule groups that depend
(``RuleDependencies``) on a rule with results in the previous iteration are evaluated, each group
in one statement for all its join rules (section 3.3.3: their inputs are told apart by the
dependency rows), the new side from ``ResultObjects`` and the other from ``Materialized`` (the
atomic rules' current results over the whole store); what they produce is the next iteration.
It ends when no rule depends on the last results: at most the longest path of the acyclic
dependency graph. ``run`` tells the three runs of an update apart (section 3.5): 1 finds
candidates against the old state (``candidates``), 2 and 3 are ordinary runs on the new state.
A result is ``fresh`` if ``Materialized`` did not hold it yet; fresh results are added to it.

Every statement is set-oriented. An equality join (identity, reference, equal values: by far
the most common) is evaluated data first, in a fixed order: from the new results to the resources
the predicate pairs them with (through the value index), their materialized results, and only
then the dependency rows of the group; starting from the dependency rows instead would visit every
rule of the group that depends on a popular input (every join rule of a rule type shares the
empty ``search CycleProvider c register c``), so the cost would grow with the rule base; the pair
of results found gives its join rule by one probe of ``JoinInputs``. SQLite
keeps the order of a ``CROSS JOIN``; PostgreSQL keeps that of explicit joins with
``join_collapse_limit = 1``, set for the statement's transaction.

The data-first statement of Figure 7's group 2 (``c.serverInformation = a``) for new results of
its parameter 1 (the ServerInformation side):

>>> group = {"group": 2, "left_param": 2, "left_property": "serverInformation", "op": "=",
...          "right_param": 1, "right_property": defaults.SUBJECT, "register_param": 2}
>>> for part in str(Filter("sqlite").equality_join(group, 1, 3, 1)).split(" CROSS JOIN "): print(part)
SELECT j.rule_id AS rule_id, x2.uri_reference AS uri_reference FROM "ResultObjects" x1
"FilterData" f2 ON f2.property = :prop2 AND f2.value = x1.uri_reference
"Materialized" x2 ON x2.uri_reference = f2.uri_reference
"JoinInputs" j ON j."group" = :g AND j.pair = x1.rule_id * 4294967296 + x2.rule_id WHERE x1.run = :run AND x1.iteration = :it
"""

from __future__ import annotations

from sqlalchemy import Integer, Text, and_, delete, exists, insert, literal, select, text, true, union
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

from catalog import defaults
from catalog.sqlops import compare
from catalog.syntax import ORDERED
from catalog.tables import (FILTER_DATA, FILTER_INPUT, FILTER_RULES, MATERIALIZED, NEW_RULES, PAIR_SHIFT,
                            RESULT_OBJECTS, RULE_DEPENDENCIES, RULE_GROUPS)

RO, MAT, FD, RD = RESULT_OBJECTS, MATERIALIZED, FILTER_DATA, RULE_DEPENDENCIES


class Filter:
    """Statements of the filter for one database dialect (``sqlite`` or ``postgresql``)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.join = " CROSS JOIN " if dialect == "sqlite" else " JOIN "

    # -- step 1: triggering rules -----------------------------------------------------------

    def trigger_selects(self, restrict) -> list[Select]:
        """(rule_id, uri_reference) of every triggering rule a ``FilterData`` row satisfies,
        restricted by ``restrict(select, rules)`` (the new rules' initial results)."""
        out = []
        plain = FILTER_RULES[None]
        out.append(restrict(select(plain.c.rule_id, FD.c.uri_reference)
                            .where(FD.c["class"] == plain.c["class"], FD.c.property == defaults.SUBJECT), plain))
        for op, rules in FILTER_RULES.items():
            if op is None:
                continue
            kinds = (False, True) if op in ("=", "!=") else (op in ORDERED,)
            for numeric in kinds:
                q = select(rules.c.rule_id, FD.c.uri_reference).where(
                    FD.c["class"] == rules.c["class"], FD.c.property == rules.c.property,
                    compare(self.dialect, op, FD.c.value, FD.c.num, rules.c.value, rules.c.num, numeric))
                if op in ("=", "!="):
                    q = q.where(rules.c.num.isnot(None) if numeric else rules.c.num.is_(None))
                out.append(restrict(q, rules))
        return out

    def trigger(self, con: Connection, run: int) -> None:
        """Step 1 for the resources in ``FilterInput``: iteration 0 of ``run``, input first (its
        rows, then the rules they satisfy through the rule tables' indexes)."""
        join = self.join
        head = f'SELECT r.rule_id AS rule_id, fd.uri_reference AS uri_reference FROM "FilterInput" fi{join}' \
               f'"FilterData" fd ON fd.uri_reference = fi.uri_reference{join}'
        parts = [head + '"FilterRules" r ON r.class = fd.class AND fd.property = :subject']
        contains = "strpos" if self.dialect == "postgresql" else "instr"
        for op, rules in FILTER_RULES.items():
            if op is None:
                continue
            on = f'"{rules.name}" r ON r.class = fd.class AND r.property = fd.property AND '
            sql_op = "<>" if op == "!=" else op
            if op == "=":
                # Equal strings of a numeric constant are equal numbers too, so the string branch
                # needs no "r.num IS NULL", which would lead SQLite to the num index and a scan
                # of every rule on the property (every OID rule).
                parts.append(head + on + "fd.value = r.value")
                parts.append(head + on + "fd.num = r.num")
            elif op == "!=":
                parts.append(head + on + "r.num IS NULL AND fd.value <> r.value")
                parts.append(head + on + "r.num IS NOT NULL AND fd.num <> r.num")
            elif op == "contains":
                parts.append(head + on + f"{contains}(fd.value, r.value) > 0")
            else:
                parts.append(head + on + f"fd.num {sql_op} r.num")
        found = text(" UNION ".join(parts)).bindparams(subject=defaults.SUBJECT).columns(
            rule_id=Integer, uri_reference=Text).subquery()
        self._record(con, run, 0, found)

    def _record(self, con: Connection, run: int, iteration: int, results) -> int:
        fresh = ~exists().where(MAT.c.rule_id == results.c.rule_id, MAT.c.uri_reference == results.c.uri_reference)
        n = con.execute(insert(RO).from_select(
            ["run", "iteration", "uri_reference", "rule_id", "fresh"],
            select(literal(run), literal(iteration), results.c.uri_reference, results.c.rule_id, fresh))).rowcount
        return n

    def _materialize_fresh(self, con: Connection, run: int, iteration: int) -> None:
        con.execute(insert(MAT).from_select(["rule_id", "uri_reference"], select(RO.c.rule_id, RO.c.uri_reference).where(
            RO.c.run == run, RO.c.iteration == iteration, RO.c.fresh == true())))

    # -- step 2: join rules, by rule group --------------------------------------------------

    def join_select(self, group: dict, sides: tuple[str, str], run: int | None = None,
                    iteration: int | None = None, only_new: bool = False) -> Select:
        """(rule_id, uri_reference) of the join rules of ``group`` (a ``RuleGroups`` row):
        each side ``"mat"`` (``Materialized``) or ``"delta"`` (``ResultObjects`` of ``run``,
        ``iteration``); ``only_new``: only the rules in ``NewRules``."""
        deps = {1: RD.alias("d1"), 2: RD.alias("d2")}
        conds = [deps[1].c.group == group["group"], deps[1].c.param == 1,
                 deps[2].c.target == deps[1].c.target, deps[2].c.param == 2]
        if only_new:
            conds.append(deps[1].c.target == NEW_RULES.c.rule_id)
        xs, values = {}, {}
        for param, kind in zip((1, 2), sides):
            if kind == "mat":
                x = MAT.alias(f"x{param}")
                conds.append(x.c.rule_id == deps[param].c.source)
            else:
                x = RO.alias(f"x{param}")
                conds += [x.c.rule_id == deps[param].c.source, x.c.run == run, x.c.iteration == iteration]
            xs[param] = x
        for param, prop in ((group["left_param"], group["left_property"]), (group["right_param"], group["right_property"])):
            if prop == defaults.SUBJECT:
                values[param] = (xs[param].c.uri_reference, None)
            else:
                f = FD.alias(f"f{param}")
                conds += [f.c.uri_reference == xs[param].c.uri_reference, f.c.property == prop]
                values[param] = (f.c.value, f.c.num)
        lv, ln = values[group["left_param"]]
        rv, rn = values[group["right_param"]]
        conds.append(compare(self.dialect, group["op"], lv, ln, rv, rn, False))
        reg = xs[group["register_param"]]
        return select(deps[1].c.target.label("rule_id"), reg.c.uri_reference.label("uri_reference")).where(and_(*conds))

    def equality_join(self, group: dict, delta: int, run: int, iteration: int):
        """The join rules of an equality ``group`` with the new results (``ResultObjects`` of
        ``run``, ``iteration``) on parameter ``delta``, data first (see the module's text)."""
        p, q = delta, 3 - delta
        props = {group["left_param"]: group["left_property"], group["right_param"]: group["right_property"]}
        join = self.join
        parts = [f'"ResultObjects" x{p}']
        value = f"x{p}.uri_reference"
        if props[p] != defaults.SUBJECT:
            parts.append(f'"FilterData" f{p} ON f{p}.uri_reference = x{p}.uri_reference AND f{p}.property = :prop{p}')
            value = f"f{p}.value"
        partner = value
        if props[q] != defaults.SUBJECT:
            parts.append(f'"FilterData" f{q} ON f{q}.property = :prop{q} AND f{q}.value = {value}')
            partner = f"f{q}.uri_reference"
        parts.append(f'"Materialized" x{q} ON x{q}.uri_reference = {partner}')
        parts.append(f'"JoinInputs" j ON j."group" = :g AND j.pair = x1.rule_id * {PAIR_SHIFT} + x2.rule_id')
        sql = (f"SELECT j.rule_id AS rule_id, x{group['register_param']}.uri_reference AS uri_reference FROM "
               + join.join(parts) + f" WHERE x{p}.run = :run AND x{p}.iteration = :it")
        # Named by parameter, not by role: both directions of one group go into one UNION.
        params = {"g": group["group"], "run": run, "it": iteration, "prop1": props[1], "prop2": props[2]}
        return text(sql).bindparams(**{k: v for k, v in params.items() if f":{k}" in sql}) \
            .columns(rule_id=Integer, uri_reference=Text)

    def join_phase(self, con: Connection, run: int) -> int:
        """Iterate the join phase of ``run`` from its iteration 0; returns the last iteration
        that produced results. Run 1 (candidates) keeps only pairs it has not found before."""
        groups = {row.group: row._asdict() for row in con.execute(select(RULE_GROUPS))}
        iteration = 0
        while True:
            # From the iteration's results' rules to the groups they feed (``InputGroups``), not
            # through RuleDependencies: a popular input has a row there per dependent rule.
            due = con.execute(text(
                f'SELECT DISTINCT i."group" FROM (SELECT DISTINCT rule_id FROM "ResultObjects" WHERE run = :run '
                f'AND iteration = :it) ro{self.join}"InputGroups" i ON i.source = ro.rule_id'),
                {"run": run, "it": iteration}).scalars().all()
            produced = 0
            for g in sorted(due):
                if groups[g]["op"] == "=":
                    found = union(self.equality_join(groups[g], 1, run, iteration),
                                  self.equality_join(groups[g], 2, run, iteration)).subquery()
                else:
                    found = union(self.join_select(groups[g], ("delta", "mat"), run, iteration),
                                  self.join_select(groups[g], ("mat", "delta"), run, iteration)).subquery()
                if run == 1:
                    seen = RO.alias("seen")
                    found = select(found).where(~exists().where(
                        seen.c.run == 1, seen.c.rule_id == found.c.rule_id,
                        seen.c.uri_reference == found.c.uri_reference)).subquery()
                produced += self._record(con, run, iteration + 1, found)
            if not produced:
                return iteration
            iteration += 1
            if run != 1:
                self._materialize_fresh(con, run, iteration)

    def keep_join_order(self, con: Connection) -> None:
        """Make PostgreSQL keep the order of explicit joins for the rest of the transaction."""
        if self.dialect == "postgresql":
            con.execute(text("SET LOCAL join_collapse_limit = 1"))

    def run(self, con: Connection, run: int) -> int:
        """An ordinary filter run (steps 1 and 2) over the resources in ``FilterInput``."""
        self.keep_join_order(con)
        self.trigger(con, run)
        self._materialize_fresh(con, run, 0)
        return self.join_phase(con, run)

    def candidates(self, con: Connection) -> int:
        """Run 1 of section 3.5, on the old state: every (resource, rule) result that depends
        on a resource in ``FilterInput`` (its old version), found by propagating from the
        results those resources are in."""
        self.keep_join_order(con)
        con.execute(insert(RO).from_select(
            ["run", "iteration", "uri_reference", "rule_id", "fresh"],
            select(literal(1), literal(0), MAT.c.uri_reference, MAT.c.rule_id, literal(False)).where(
                MAT.c.uri_reference == FILTER_INPUT.c.uri_reference)))
        return self.join_phase(con, 1)

    def drop_candidates(self, con: Connection) -> None:
        """Remove run 1's candidates from ``Materialized``; runs 2 and 3 add back what still holds."""
        con.execute(delete(MAT).where(exists().where(
            RO.c.run == 1, RO.c.rule_id == MAT.c.rule_id, RO.c.uri_reference == MAT.c.uri_reference)))

    # -- the initial result of new atomic rules ---------------------------------------------

    def materialize_new(self, con: Connection, by_depth: dict[int, list[int]]) -> None:
        """Compute the results of new atomic rules over the whole store, shallowest first (a
        new join rule's inputs are materialized before it): a new subscription's initial load."""
        for depth in sorted(by_depth):
            con.execute(delete(NEW_RULES))
            con.execute(insert(NEW_RULES), [{"rule_id": r} for r in by_depth[depth]])
            if depth == 0:
                selects = self.trigger_selects(lambda q, rules: q.where(rules.c.rule_id == NEW_RULES.c.rule_id))
                found = union(*selects).subquery()
                con.execute(insert(MAT).from_select(["rule_id", "uri_reference"], select(found.c.rule_id, found.c.uri_reference)))
                continue
            due = con.execute(select(RD.c.group).distinct().where(RD.c.target == NEW_RULES.c.rule_id)).scalars().all()
            for g in sorted(due):
                row = con.execute(select(RULE_GROUPS).where(RULE_GROUPS.c.group == g)).one()._asdict()
                q = self.join_select(row, ("mat", "mat"), only_new=True).subquery()
                con.execute(insert(MAT).from_select(["rule_id", "uri_reference"], select(q).distinct()))
