import subprocess
import sys


def test_import_is_light():
    code = "import sys, sage_agents; print(any(m in sys.modules for m in ('torch', 'transformers', 'trl')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lazy_exports_resolve():
    import sage_agents

    for name in sage_agents.__all__:
        assert getattr(sage_agents, name) is not None
    assert "TrainConfig" in dir(sage_agents)
