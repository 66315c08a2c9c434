from conftest import profile_all


def test_backends_lists_each_with_its_availability():
    result = profile_all("backends")
    assert result.returncode == 0, result.stderr
    for name, kind in (("wallclock", "timer"), ("cprofile", "tracer")):
        line = next(line for line in result.stdout.splitlines() if f" {name} " in line)
        assert kind in line and "yes" in line


def test_version():
    done = profile_all("--version")
    assert done.returncode == 0 and done.stdout.strip().startswith("profile-all 0."), done


def test_backends_fit_a_terminal_and_say_more_with_v():
    short = profile_all("backends", env={"COLUMNS": "80"})
    assert short.returncode == 0 and len(short.stdout.splitlines()) < 25, short.stdout
    assert "native file" not in short.stdout and "profile-all backends -v" in short.stdout
    full = profile_all("backends", "-v")
    assert full.returncode == 0 and "native file" in full.stdout and "SnakeViz" in full.stdout
