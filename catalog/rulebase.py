"""The global dependency graph (paper section 3.3.2) and its tables: atomic rules are stored once
(``AtomicRules.text`` is unique), so a new rule's dependency tree is merged into the graph by
interning its atomic rules; join rules with equal templates form a rule group (section 3.3.3,
``RuleGroups``), whose id is also kept on the dependency rows (section 3.3.4). Triggering rules
go into ``FilterRules`` / ``FilterRules_*`` (Figure 8), their constants as strings with the
numeric reading beside them.

Ids are handed out here (one writer per backbone), so a whole batch of subscriptions is
decomposed in memory and written with one insert per table; :meth:`RuleBase.discard` forgets
what a failed registration interned. Atomic rules no subscription uses any more are removed
(:meth:`RuleBase.remove_unused`): ``RuleUses`` is their reference count.

>>> from catalog.db import open_database
>>> from catalog.decompose import Trigger
>>> from catalog.tables import METADATA
>>> engine = open_database(None, METADATA)
>>> with engine.begin() as con:
...     rules = RuleBase(con)
...     ids = rules.trigger(Trigger("ServerInformation", "memory", ">", 64.0)), rules.trigger(Trigger("CycleProvider"))
...     rules.write(con)
...     con.execute(select(FILTER_RULES[">"])).all()
[(1, 'ServerInformation', 'memory', '64', 64.0)]
>>> ids, rules.trigger(Trigger("CycleProvider"))
((1, 2), 2)
"""

from __future__ import annotations

from sqlalchemy import delete, exists, func, insert, select
from sqlalchemy.engine import Connection

from catalog.decompose import Interner, Template, Trigger
from catalog.tables import ATOMIC_RULES, FILTER_RULES, INPUT_GROUPS, JOIN_INPUTS, MATERIALIZED, PAIR_SHIFT, RULE_DEPENDENCIES, RULE_GROUPS, RULE_USES
from catalog.values import constant_text


class RuleBase(Interner):
    """Atomic rules by text, with their depth and type, mirrored from the tables."""

    def __init__(self, con: Connection) -> None:
        self.ids: dict[str, int] = {}
        self.depth: dict[int, int] = {}
        self.groups: dict[str, int] = {}
        for row in con.execute(select(ATOMIC_RULES.c.rule_id, ATOMIC_RULES.c.text, ATOMIC_RULES.c.depth)):
            self.ids[row.text] = row.rule_id
            self.depth[row.rule_id] = row.depth
        for row in con.execute(select(RULE_GROUPS.c.group, RULE_GROUPS.c.text)):
            self.groups[row.text] = row.group
        self.inputs: set[tuple[int, int]] = {tuple(r) for r in con.execute(select(INPUT_GROUPS))}
        self.next_rule = (con.execute(select(func.max(ATOMIC_RULES.c.rule_id))).scalar() or 0) + 1
        self.next_group = (con.execute(select(func.max(RULE_GROUPS.c.group))).scalar() or 0) + 1
        self._reset()

    def _reset(self) -> None:
        self.rows: dict[str, list[dict]] = {"rules": [], "deps": [], "groups": [], "inputs": [], "input_groups": []}
        self.filter_rows: dict[str | None, list[dict]] = {op: [] for op in FILTER_RULES}
        self.touched: set[int] = set()

    def _new(self, text: str, type_: str, depth: int, group: int | None) -> tuple[int, bool]:
        rule = self.ids.get(text)
        if rule is None:
            rule = self.next_rule
            self.next_rule += 1
            self.ids[text] = rule
            self.depth[rule] = depth
            self.rows["rules"].append({"rule_id": rule, "text": text, "group": group, "type": type_, "depth": depth})
            self.touched.add(rule)
            return rule, True
        self.touched.add(rule)
        return rule, False

    def trigger(self, t: Trigger) -> int:
        rule, new = self._new(t.text(), t.cls, 0, None)
        if new:
            row = {"rule_id": rule, "class": t.cls}
            if t.op is not None:
                row.update(property=t.prop, value=t.value if isinstance(t.value, str) else constant_text(t.value),
                           num=t.value if isinstance(t.value, float) else None)
            self.filter_rows[t.op].append(row)
        return rule

    def join(self, tpl: Template, rule1: int, rule2: int) -> int:
        group_text = tpl.group_text()
        group = self.groups.get(group_text)
        if group is None:
            group = self.groups[group_text] = self.next_group
            self.next_group += 1
            self.rows["groups"].append({"group": group, "text": group_text, "left_param": tpl.left,
                                        "left_property": tpl.left_prop, "op": tpl.op, "right_param": tpl.right,
                                        "right_property": tpl.right_prop, "register_param": tpl.register})
        text = tpl.text(f"view({rule1}, {tpl.cls1})", f"view({rule2}, {tpl.cls2})")
        rule, new = self._new(text, tpl.type, 1 + max(self.depth[rule1], self.depth[rule2]), group)
        if new:
            self.rows["deps"] += [{"source": rule1, "target": rule, "param": 1, "group": group},
                                  {"source": rule2, "target": rule, "param": 2, "group": group}]
            self.rows["inputs"].append({"rule_id": rule, "group": group, "source1": rule1, "source2": rule2,
                                        "pair": rule1 * PAIR_SHIFT + rule2})
            for source in (rule1, rule2):
                if (source, group) not in self.inputs:
                    self.inputs.add((source, group))
                    self.rows["input_groups"].append({"source": source, "group": group})
        return rule

    def new_by_depth(self) -> dict[int, list[int]]:
        """The rules interned since the last :meth:`write`, by depth."""
        out: dict[int, list[int]] = {}
        for row in self.rows["rules"]:
            out.setdefault(row["depth"], []).append(row["rule_id"])
        return out

    def write(self, con: Connection) -> None:
        """Insert what was interned; the caller's transaction commits it."""
        for table, key in ((RULE_GROUPS, "groups"), (ATOMIC_RULES, "rules"), (RULE_DEPENDENCIES, "deps"),
                           (JOIN_INPUTS, "inputs"), (INPUT_GROUPS, "input_groups")):
            if self.rows[key]:
                con.execute(insert(table), self.rows[key])
        for op, rows in self.filter_rows.items():
            if rows:
                con.execute(insert(FILTER_RULES[op]), rows)
        self._reset()

    def discard(self) -> None:
        """Forget what was interned since the last :meth:`write` (its transaction rolled back)."""
        for row in self.rows["rules"]:
            del self.ids[row["text"]]
            del self.depth[row["rule_id"]]
        for row in self.rows["groups"]:
            del self.groups[row["text"]]
        for row in self.rows["input_groups"]:
            self.inputs.discard((row["source"], row["group"]))
        self._reset()

    def remove_unused(self, con: Connection) -> list[int]:
        """Delete the atomic rules no subscription uses (with their filter rows, dependencies,
        results, and groups left empty); returns their ids."""
        unused = con.execute(select(ATOMIC_RULES.c.rule_id, ATOMIC_RULES.c.text).where(
            ~exists().where(RULE_USES.c.rule_id == ATOMIC_RULES.c.rule_id))).all()
        ids = [r.rule_id for r in unused]
        for chunk in (ids[i:i + 500] for i in range(0, len(ids), 500)):
            for table in FILTER_RULES.values():
                con.execute(delete(table).where(table.c.rule_id.in_(chunk)))
            con.execute(delete(RULE_DEPENDENCIES).where(RULE_DEPENDENCIES.c.target.in_(chunk)))
            con.execute(delete(JOIN_INPUTS).where(JOIN_INPUTS.c.rule_id.in_(chunk)))
            con.execute(delete(MATERIALIZED).where(MATERIALIZED.c.rule_id.in_(chunk)))
            con.execute(delete(ATOMIC_RULES).where(ATOMIC_RULES.c.rule_id.in_(chunk)))
        con.execute(delete(INPUT_GROUPS).where(~exists().where(
            RULE_DEPENDENCIES.c.source == INPUT_GROUPS.c.source, RULE_DEPENDENCIES.c.group == INPUT_GROUPS.c.group)))
        self.inputs = {tuple(r) for r in con.execute(select(INPUT_GROUPS))}
        empty = con.execute(select(RULE_GROUPS.c.group, RULE_GROUPS.c.text).where(
            ~exists().where(ATOMIC_RULES.c.group == RULE_GROUPS.c.group))).all()
        if empty:
            con.execute(delete(RULE_GROUPS).where(RULE_GROUPS.c.group.in_([g.group for g in empty])))
        for r in unused:
            del self.ids[r.text]
            del self.depth[r.rule_id]
        for g in empty:
            del self.groups[g.text]
        return ids
