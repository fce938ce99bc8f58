"""botocore's service models and endpoints are read from disk once for every loader while a simulation runs, each
loader gets what it would have read itself, and botocore's method is back after."""

from __future__ import annotations

from typing import Any

import botocore.loaders
import botocore.session
import pytest

from simulation.botocore_data import shared_botocore_data


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files botocore's file loader opens, in order."""
    opened: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file

    def recording(self: Any, file_path: str) -> Any:
        opened.append(str(file_path))
        return load_file(self, file_path)

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", recording)
    return opened


def _model(loader: Any) -> Any:
    return loader.load_service_model("ec2", "service-2")


def test_every_loader_gets_the_model_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _model(botocore.loaders.create_loader())
    opened = _reads(monkeypatch)
    with shared_botocore_data():
        # new sessions (as moto makes at import), a loader searching a folder of its own first (as moto's does)
        sessions = [botocore.session.get_session() for _ in range(3)]
        regions = [s.get_available_regions("ec2", partition_name=p) for s, p in
                   zip(sessions, ("aws", "aws-us-gov", "aws-cn"), strict=True)]
        own_first = botocore.loaders.Loader(extra_search_paths=[str(botocore.loaders.BOTOCORE_ROOT)])
        models = [_model(s.get_component("data_loader")) for s in sessions] + [_model(own_first)]
    assert all(model == expected for model in models)
    assert "us-east-1" in regions[0] and regions[1] and regions[2]
    assert sum(path.endswith("ec2/2016-11-15/service-2") for path in opened) == 1
    assert sum(path.endswith("/endpoints") for path in opened) == 1
    # what it does not keep (paginators, merged with extras per loader) is read by each loader as before
    with shared_botocore_data():
        for session in sessions[:2]:
            session.get_component("data_loader").load_service_model("ec2", "paginators-1")
    assert sum(path.endswith("ec2/2016-11-15/paginators-1") for path in opened) == 2


def test_botocore_method_is_back_after() -> None:
    original = botocore.loaders.Loader.load_data_with_path
    with shared_botocore_data():
        assert botocore.loaders.Loader.load_data_with_path is not original
    assert botocore.loaders.Loader.load_data_with_path is original
