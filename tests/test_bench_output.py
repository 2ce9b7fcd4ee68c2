"""The example in bench.output's docstring runs."""

import doctest

import bench.output


def test_docstring_example():
    result = doctest.testmod(bench.output, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
