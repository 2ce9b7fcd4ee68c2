"""PEP partitions: don't care, balance within the tolerance, exclusiveness,
incremental placement and rebalance; the random baseline; buckets."""

import random
import subprocess
import sys
from collections import Counter

import pytest

from partitioning import DONT_CARE, PartitioningError, PepPartitioner, random_partitioning
from partitioning.buckets import Buckets, stable_hash
from partitioning.occurrence import SchemaOccurrence
from partitioning.pep import capacity
from partitioning.predicates import Equality, Pattern, equalities

PATTERNS = [Pattern(f"/m/e{j}", "@v") for j in range(6)]
DTD = SchemaOccurrence.from_dtd("<!ELEMENT m (e0?, e1?, e2?, e3?, e4?, e5?)>" +
                                "".join(f"<!ELEMENT e{j} EMPTY>" for j in range(6)))


def synthetic(n, values=50, per=2, seed=0, zipf=0.0, prefix="p"):
    rng = random.Random(seed)
    weights = [1 / (v + 1) ** zipf for v in range(values)]
    out = {}
    for i in range(n):
        pats = rng.sample(PATTERNS, per)
        out[f"{prefix}{i}"] = tuple(Equality(p, float(rng.choices(range(values), weights)[0])) for p in pats)
    return out


def matching(pop, message):
    """Profiles whose equalities all hold in ``message`` (pattern -> set of values)."""
    return [pid for pid, eqs in pop.items() if all(e.value in message.get(e.pattern, ()) for e in eqs)]


def test_profiles_without_patterns_form_the_dont_care_partition():
    pop = synthetic(300)
    pop.update({"plain": equalities("/m/e1"), "ranged": equalities("/m[e1/@v > 3]"),
                "or": equalities("/m[e1/@v = 1 or e2/@v = 2]"), "lonely": equalities("/m[zz/@v = 1]")})
    part = PepPartitioner.fit(pop, 8, occurrence=DTD).partitioning()
    assert {pid for pid, p in part.assignment.items() if p == DONT_CARE} == {"plain", "ranged", "or", "lonely"}
    assert part.dont_care == 4 and part.summary()["dont_care"] == 4
    assert sum(part.loads) == 300


@pytest.mark.parametrize("zipf", [0.0, 1.0])
@pytest.mark.parametrize("tolerance", [0.05, 0.1, 0.3])
def test_partitions_stay_within_the_stated_tolerance(zipf, tolerance):
    pop = synthetic(20_000, values=200, zipf=zipf, seed=1)
    part = PepPartitioner.fit(pop, 40, occurrence=DTD, tolerance=tolerance).partitioning()
    mean = 20_000 / 40
    assert max(part.loads) <= capacity(20_000, 40, tolerance) == part.cap
    assert part.cap <= max((1 + tolerance) * mean, mean + 1 / tolerance) + 1
    if zipf == 0.0:
        assert part.spilled == 0 and part.imbalance() < 1.02
    else:
        assert part.spilled > 0  # the heaviest values cannot all fit their buckets


def test_a_message_with_one_value_per_pattern_hits_at_most_one_partition_per_pattern():
    pop = synthetic(5000, values=30, seed=2)
    pep = PepPartitioner.fit(pop, 25, occurrence=DTD)
    part = pep.partitioning()
    assert part.spilled == 0
    rng = random.Random(5)
    for _ in range(50):
        message = {p: {float(rng.randrange(30))} for p in PATTERNS}
        hit = {part.assignment[pid] for pid in matching(pop, message)}
        assert len(hit) <= len(part.patterns)
    rand = random_partitioning(list(pop), 25)
    message = {p: {float(rng.randrange(30))} for p in PATTERNS}
    assert len({rand.assignment[pid] for pid in matching(pop, message)}) > len(part.patterns)


def test_a_profile_with_several_patterns_goes_to_the_least_loaded_of_its_buckets():
    pep = PepPartitioner.fit(synthetic(4000, values=50, seed=6), 20, occurrence=DTD)
    rng, differing = random.Random(1), 0
    for i in range(300):
        eqs = tuple(Equality(p, float(rng.randrange(50))) for p in rng.sample(PATTERNS, 2))
        buckets = [pep.label[pep.buckets[e.pattern](e.value)] for e in eqs if e.pattern in pep.buckets]
        loads = list(pep.loads)
        part = pep.add(f"new{i}", eqs)
        assert part == min(buckets, key=loads.__getitem__)
        differing += loads[buckets[0]] != loads[buckets[-1]]
    assert differing > 100


def test_incremental_placement_keeps_equal_values_together_and_loads_consistent():
    pep = PepPartitioner(10, occurrence=DTD)
    first = pep.add("x0", equalities("/m[e0/@v = 1]"))
    assert first == DONT_CARE  # one value seen: no exclusiveness pattern yet
    for i, (pid, eqs) in enumerate(synthetic(2000, values=40, per=1, seed=3).items()):
        pep.add(pid, eqs)
    same = [pep.add(f"s{i}", equalities("/m[e2/@v = 17]")) for i in range(5)]
    assert len(set(same)) == 1 and same[0] != DONT_CARE
    assert sum(pep.loads) == sum(1 for p in pep.assignment.values() if p != DONT_CARE) == pep.patterned
    pep.remove("s0")
    pep.remove("s0")  # twice is harmless
    assert pep.loads[same[0]] == Counter(pep.assignment.values())[same[0]]
    moved_to = pep.add("s1", equalities("/m[e3/@v = 5]"))  # an update re-places the profile
    assert pep.assignment["s1"] == moved_to and len(pep.assignment) == len(pep.profiles)
    assert max(pep.loads) <= capacity(pep.patterned, 10, 0.1)
    assert pep.discovery is not None and {s.pattern for s in pep.discovery.chosen} >= set(PATTERNS[:4])


def test_rebalance_moves_profiles_as_deltas_and_a_second_rebalance_moves_nothing():
    pep = PepPartitioner(12, occurrence=DTD, growth=10.0)  # rediscovers rarely: placement drifts
    pop = synthetic(3000, values=60, seed=4)
    for pid, eqs in pop.items():
        pep.add(pid, eqs)
    before = dict(pep.assignment)
    moved = pep.rebalance()
    assert moved, "a drifted population should move"
    for pid, (old, new) in moved.items():
        assert before[pid] == old and pep.assignment[pid] == new and old != new
    assert all(before[pid] == p for pid, p in pep.assignment.items() if pid not in moved)
    assert len(moved) < len(pop)  # partitions were relabelled to keep most profiles in place
    fitted = PepPartitioner.fit(pop, 12, occurrence=DTD).partitioning()
    assert sorted(pep.loads) == sorted(fitted.loads)
    assert pep.rebalance() == {}


def test_random_partitioning_is_balanced_and_seeded():
    ids = [f"p{i}" for i in range(1003)]
    a, b = random_partitioning(ids, 10, seed=1), random_partitioning(ids, 10, seed=1)
    assert a.assignment == b.assignment != random_partitioning(ids, 10, seed=2).assignment
    assert max(a.loads) - min(a.loads) <= 1 and Counter(a.assignment.values()) == dict(enumerate(a.loads))


def test_bad_settings_are_refused():
    for kw in ({"partitions": 0}, {"partitions": 3, "tolerance": 0}, {"partitions": 3, "growth": -1}):
        with pytest.raises(PartitioningError):
            PepPartitioner(**kw)
    with pytest.raises(PartitioningError):
        random_partitioning(["a"], 0)


def test_buckets_split_numbers_by_range_and_strings_by_hash():
    nums = Buckets(4, Counter({float(v): 1 for v in range(100)}))
    got = [nums(float(v)) for v in range(100)]
    assert got == sorted(got) and Counter(got) == {0: 25, 1: 25, 2: 25, 3: 25}
    assert nums(1000.0) == 3 and nums(-1.0) == 0 and nums(49.5) == nums(49.0)
    words = Buckets(4, Counter({f"w{i}": 1 for i in range(400)}))
    assert max(Counter(words(f"w{i}") for i in range(400)).values()) <= 110
    assert words("unseen") == words("unseen")
    sparse = Buckets(10, Counter({"a": 5, "b": 5}))
    assert not sparse.dense and sparse("new") == stable_hash("new") % 10
    sparse.relabel({sparse("a"): 7})
    assert sparse("a") == 7


def test_the_value_hash_is_the_same_in_another_process():
    code = "from partitioning.buckets import stable_hash; print(stable_hash('SF'), stable_hash(5.0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(stable_hash("SF")), str(stable_hash(5.0))]
