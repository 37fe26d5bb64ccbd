"""model_configs/bundled.json and model_configs/hardware/bundled.json are exactly the bundled YAML
files, parsed (the YAML files are the source; the JSON lets analytic commands start without
importing a YAML parser).

After editing or adding a bundled YAML, rewrite the JSON with `python tests/test_bundled.py`.
"""

import json

from llmcalc.analysis.config import BUNDLED_JSON, _bundled_dir, _read_yaml, bundled_names, load_bundled
from llmcalc.analysis.hardware import HARDWARE_DIR, bundled_hardware, load_hardware

FOLDERS = (_bundled_dir(), _bundled_dir() / HARDWARE_DIR)


def parsed_yaml(folder) -> dict[str, dict]:
    files = sorted(folder.glob("*.yaml"))
    return {f.stem: _read_yaml(f.read_text(encoding="utf-8"), f.name)[0] for f in files}


def test_bundled_json_is_the_yaml_files():
    for folder in FOLDERS:
        assert json.loads((folder / BUNDLED_JSON).read_text()) == parsed_yaml(folder), \
            f"{folder / BUNDLED_JSON} is stale: run python tests/test_bundled.py"


def test_every_yaml_file_is_bundled():
    assert bundled_names() == sorted(f.stem for f in FOLDERS[0].glob("*.yaml"))
    assert load_bundled("mistral-7b").sliding_window == 4096
    assert bundled_hardware() == sorted(f.stem for f in FOLDERS[1].glob("*.yaml"))
    assert all(load_hardware(name).name == name for name in bundled_hardware())


if __name__ == "__main__":
    for folder in FOLDERS:
        (folder / BUNDLED_JSON).write_text(json.dumps(parsed_yaml(folder), indent=1) + "\n")
        print(f"wrote {folder / BUNDLED_JSON}")
