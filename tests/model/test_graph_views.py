import subprocess
import sys

import numpy as np
import pytest

from causaltrace import SCM, Exogenous, Linear, Node, Normal


@pytest.fixture
def collider_scm(small_panel):
    """A -> C <- B, C -> D, with a latent confounder L of A and D."""
    nodes = [
        Node("L", Exogenous(), noise=Normal(), observed=False),
        Node("A", Linear.of(L=1.0), parents=("L",), noise=Normal()),
        Node("B", Exogenous(), noise=Normal()),
        Node("C", Linear.of(A=1.0, B=1.0), parents=("A", "B"), noise=Normal()),
        Node("D", Linear.of(C=1.0, L=1.0), parents=("C", "L"), noise=Normal()),
    ]
    return SCM(nodes, small_panel, name="collider")


def test_networkx_view_and_relatives(collider_scm):
    g = collider_scm.graph
    assert set(g.edges) == {("L", "A"), ("A", "C"), ("B", "C"), ("C", "D"), ("L", "D")}
    assert g.nodes["L"]["observed"] is False
    g.add_edge("D", "A")  # the view is a copy: the model is unchanged
    assert ("D", "A") not in collider_scm.graph.edges
    assert collider_scm.ancestors("D") == {"L", "A", "B", "C"}
    assert collider_scm.descendants("A") == {"C", "D"}
    assert collider_scm.latent == ("L",)


def test_d_separation(collider_scm):
    assert collider_scm.d_separated("A", "B")  # collider C blocks
    assert not collider_scm.d_separated("A", "B", "C")  # conditioning opens it
    assert not collider_scm.d_separated("A", "B", "D")  # so does a descendant of C
    assert not collider_scm.d_separated("A", "D", "C")  # the latent L still connects them
    assert collider_scm.d_separated("A", "D", {"C", "L"})


def test_local_markov_holds_as_d_separation(collider_scm):
    implied = collider_scm.local_markov()
    assert implied, "the graph implies independences"
    for ind in implied:
        assert collider_scm.d_separated(ind.x, ind.others, ind.given), str(ind)


def test_pgmpy_export(collider_scm):
    dag = collider_scm.to_pgmpy()
    assert set(dag.edges()) == set(collider_scm.graph.edges)
    assert dag.latents == {"L"}
    # pgmpy's own d-separation agrees with ours on a query.
    assert not dag.is_dconnected("A", "B")
    assert dag.is_dconnected("A", "B", observed=["C"])


def test_graph_png_is_a_nonblank_picture(collider_scm, tmp_path):
    import matplotlib.image as mpimg

    path = collider_scm.draw(str(tmp_path / "graph.png"), highlight=["C"])
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(path)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 200
    # Nodes, edges and labels make the picture far from uniform.
    assert np.asarray(pixels[..., :3]).std() > 0.05


def test_import_causaltrace_is_light():
    code = (
        "import sys, causaltrace; "
        "heavy = [m for m in ('pgmpy', 'matplotlib', 'pandas', 'duckdb', 'torch', 'hydra', 'numba', "
        "'dowhy') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_engine_never_imports_domains():
    import ast
    import pathlib

    import causaltrace

    root = pathlib.Path(causaltrace.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] in ("domains", "causaltrace_domains")
            ]
    assert offenders == []
