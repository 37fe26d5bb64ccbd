"""model_configs/bundled.json is exactly the bundled YAML files, parsed (the YAML files are the
source; the JSON lets analytic commands start without importing a YAML parser).

After editing or adding a bundled YAML, rewrite the JSON with `python tests/test_bundled.py`.
"""

import json

from llmcalc.analysis.config import BUNDLED_JSON, _bundled_dir, _read_yaml, bundled_names, load_bundled

DIR = _bundled_dir()


def parsed_yaml() -> dict[str, dict]:
    files = sorted(DIR.glob("*.yaml"))
    return {f.stem: _read_yaml(f.read_text(encoding="utf-8"), f.name)[0] for f in files}


def test_bundled_json_is_the_yaml_files():
    assert json.loads((DIR / BUNDLED_JSON).read_text()) == parsed_yaml(), \
        "model_configs/bundled.json is stale: run python tests/test_bundled.py"


def test_every_yaml_file_is_bundled():
    assert bundled_names() == sorted(f.stem for f in DIR.glob("*.yaml"))
    assert load_bundled("mistral-7b").sliding_window == 4096


if __name__ == "__main__":
    (DIR / BUNDLED_JSON).write_text(json.dumps(parsed_yaml(), indent=1) + "\n")
    print(f"wrote {DIR / BUNDLED_JSON}")
