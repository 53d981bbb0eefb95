"""README's tasks and options tables are the generator's output (python -m cleanbuild.cli.clidoc --write)."""

from __future__ import annotations

from cleanbuild.cli import clidoc


def test_readme_blocks_are_the_generated_tables():
    found = clidoc.blocks(clidoc.README.read_text(encoding="utf-8"))
    missing = [block for block, text in found.items() if text is None]
    assert not missing, (f"README.md has no <!-- {missing[0]}:begin --> ... <!-- {missing[0]}:end --> markers. "
                         "Add them, then run `python -m cleanbuild.cli.clidoc --write`.")
    assert found == clidoc.render(), "README's tables are stale: run `python -m cleanbuild.cli.clidoc --write`."


def test_write_replaces_only_the_blocks(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- tasks:begin -->\nold\n<!-- tasks:end -->\nmiddle\n"
                      "<!-- options:begin --><!-- options:end -->\nend\n")
    assert clidoc.main(["--write", "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert clidoc.blocks(text) == clidoc.render()
    assert (text.startswith("intro\n"), "\nmiddle\n" in text, text.endswith("\nend\n")) == (True, True, True)


def test_write_without_markers_is_exit_2_and_changes_nothing(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    assert clidoc.main(["--write", "--readme", str(readme)]) == 2
    assert readme.read_text() == "no markers\n"
    assert capsys.readouterr().err.startswith(f"error: {readme} has no <!-- tasks:begin --> ... <!-- tasks:end -->")


def test_every_task_and_every_option_is_in_the_tables():
    tables = clidoc.render()
    assert all(f"| `{name}` |" in tables["tasks"] for name in clidoc.ns.task_names)
    assert all(f"`{o.flag_name}`" in tables["options"] for o in clidoc.OPTIONS if o.flag)
    assert all(f"`{o.key}`" in tables["options"] for o in clidoc.OPTIONS if o.config)
