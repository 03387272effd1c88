"""The twin's floor as a Redfish service (``storage.interop.emit.FloorState``): the resource at a
path (chassis, rack PDUs, CDUs) and the leaf paths an ingest polls."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from storage.interop.emit import FloorState, encode1, field_of
from storage.interop.mapping import Field

ROOT = "/redfish/v1"


def _res(path: str, odata_type: str, body: dict[str, Any], state: FloorState) -> dict[str, Any]:
    doc = {"@odata.id": path, "@odata.type": odata_type, **body}
    if state.time_s is not None:
        # Redfish readings carry no sample time; the twin names its step here (Oem: its own).
        doc["Oem"] = {"Twin": {"Timestamp": state.iso(state.time_s)}}
    return doc


def _reading(fmt_field: Field, v: float) -> float | None:
    x = encode1(fmt_field, v)
    return x if math.isfinite(x) else None


def _collection(path: str, members: list[str]) -> dict[str, Any]:
    return {
        "@odata.id": path,
        "Members": [{"@odata.id": m} for m in members],
        "Members@odata.count": len(members),
    }


def redfish(state: FloorState, path: str) -> dict[str, Any] | None:
    """The Redfish resource at ``path`` (None: no such resource)."""
    path = path.rstrip("/")
    uids = [int(x) for x in state.us.get("ultraserver_id", np.array([], dtype=np.int64)).tolist()]
    rids = [int(x) for x in state.rows.get("row_id", np.array([], dtype=np.int64)).tolist()]
    top = _service(path, uids, rids)
    if top is not None:
        return top
    parts = path[len(ROOT) + 1 :].split("/") if path.startswith(ROOT + "/") else []
    if len(parts) >= 2 and parts[0] == "Chassis" and parts[1].startswith("us"):
        return _chassis(state, path, parts, uids)
    if len(parts) >= 3 and parts[:2] == ["PowerEquipment", "RackPDUs"] and parts[2].startswith("row"):
        return _rack_pdu(state, path, parts, rids)
    if len(parts) >= 3 and parts[:2] == ["ThermalEquipment", "CDUs"] and parts[2].startswith("cdu"):
        return _cdu(state, path, parts, uids)
    return None


def _service(path: str, uids: list[int], rids: list[int]) -> dict[str, Any] | None:
    """The service root and the collections (None: ``path`` is none of them)."""
    if path == ROOT:
        return {
            "@odata.id": ROOT,
            "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
            "Id": "RootService",
            "RedfishVersion": "1.17.0",
            "Chassis": {"@odata.id": f"{ROOT}/Chassis"},
            "PowerEquipment": {"@odata.id": f"{ROOT}/PowerEquipment"},
            "ThermalEquipment": {"@odata.id": f"{ROOT}/ThermalEquipment"},
        }
    if path == f"{ROOT}/Chassis":
        return _collection(path, [f"{path}/us{u}" for u in uids])
    if path == f"{ROOT}/PowerEquipment":
        return {"@odata.id": path, "RackPDUs": {"@odata.id": f"{path}/RackPDUs"}}
    if path == f"{ROOT}/PowerEquipment/RackPDUs":
        return _collection(path, [f"{path}/row{r}" for r in rids])
    if path == f"{ROOT}/ThermalEquipment":
        return {"@odata.id": path, "CDUs": {"@odata.id": f"{path}/CDUs"}}
    if path == f"{ROOT}/ThermalEquipment/CDUs":
        return _collection(path, [f"{path}/cdu{u}" for u in uids])
    return None


def _chassis(state: FloorState, path: str, parts: list[str], uids: list[int]) -> dict[str, Any] | None:
    """An UltraServer's chassis, its power and its environment metrics."""
    us = state.us
    i = _index(uids, parts[1][2:])
    if i is None:
        return None
    base = f"{ROOT}/Chassis/{parts[1]}"
    if len(parts) == 2:
        return _res(
            path,
            "#Chassis.v1_23_0.Chassis",
            {
                "Id": parts[1],
                "Name": f"UltraServer {parts[1][2:]}",
                "ChassisType": "RackMount",
                "Power": {"@odata.id": f"{base}/Power"},
                "EnvironmentMetrics": {"@odata.id": f"{base}/EnvironmentMetrics"},
            },
            state,
        )
    if parts[2:] == ["Power"]:
        f = field_of("redfish", "us.power")
        return _res(
            path,
            "#Power.v1_7_1.Power",
            {
                "Id": "Power",
                "PowerControl": [
                    {
                        "@odata.id": f"{path}#/PowerControl/0",
                        "MemberId": "0",
                        "PowerConsumedWatts": _reading(f, us["power_w"][i]),
                    }
                ],
            },
            state,
        )
    if parts[2:] == ["EnvironmentMetrics"]:
        f = field_of("redfish", "us.max_chip_temperature")
        return _res(
            path,
            "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
            {
                "Id": "EnvironmentMetrics",
                "TemperatureCelsius": {"Reading": _reading(f, us["max_chip_temp_c"][i])},
            },
            state,
        )
    return None


def _rack_pdu(state: FloorState, path: str, parts: list[str], rids: list[int]) -> dict[str, Any] | None:
    """A row's rack PDU and its metrics."""
    i = _index(rids, parts[2][3:])
    if i is None:
        return None
    if len(parts) == 3:
        return _res(
            path,
            "#PowerDistribution.v1_3_0.PowerDistribution",
            {"Id": parts[2], "EquipmentType": "RackPDU", "Metrics": {"@odata.id": f"{path}/Metrics"}},
            state,
        )
    if parts[3:] == ["Metrics"]:
        f = field_of("redfish", "row.power")
        return _res(
            path,
            "#PowerDistributionMetrics.v1_3_0.PowerDistributionMetrics",
            {"Id": "Metrics", "PowerWatts": {"Reading": _reading(f, state.rows["power_w"][i])}},
            state,
        )
    return None


def _cdu(state: FloorState, path: str, parts: list[str], uids: list[int]) -> dict[str, Any] | None:
    """An UltraServer's CDU, its secondary coolant connector and its pump."""
    us = state.us
    i = _index(uids, parts[2][3:])
    if i is None:
        return None
    if len(parts) == 3:
        return _res(
            path,
            "#CoolingUnit.v1_1_0.CoolingUnit",
            {
                "Id": parts[2],
                "EquipmentType": "CDU",
                "SecondaryCoolantConnectors": {"@odata.id": f"{path}/SecondaryCoolantConnectors"},
                "Pumps": {"@odata.id": f"{path}/Pumps"},
            },
            state,
        )
    if parts[3:] == ["SecondaryCoolantConnectors"]:
        return _collection(path, [f"{path}/1"])
    if parts[3:] == ["Pumps"]:
        return _collection(path, [f"{path}/1"])
    if parts[3:] == ["SecondaryCoolantConnectors", "1"]:
        fs = field_of("redfish", "cdu.supply_temperature")
        fr = field_of("redfish", "cdu.return_temperature")
        return _res(
            path,
            "#CoolantConnector.v1_1_0.CoolantConnector",
            {
                "Id": "1",
                "SupplyTemperatureCelsius": {
                    "Reading": _reading(fs, state.factory.get("coolant_supply_c", math.nan))
                },
                "ReturnTemperatureCelsius": {"Reading": _reading(fr, us["coolant_return_c"][i])},
            },
            state,
        )
    if parts[3:] == ["Pumps", "1"]:
        f = field_of("redfish", "cdu.flow")
        return _res(
            path,
            "#Pump.v1_1_0.Pump",
            {
                "Id": "1",
                "PumpType": "Liquid",
                "PumpSpeedPercent": {"Reading": _reading(f, us["cdu_flow_fraction"][i])},
            },
            state,
        )
    return None


def _index(ids: list[int], s: str) -> int | None:
    if not s.isdigit():
        return None
    try:
        return ids.index(int(s))
    except ValueError:
        return None


def redfish_paths(state: FloorState) -> list[str]:
    """Every leaf resource holding a mapped reading (what an ingest of the service polls)."""
    out = []
    for u in state.us.get("ultraserver_id", np.array([])).tolist():
        out += [f"{ROOT}/Chassis/us{u}/Power", f"{ROOT}/Chassis/us{u}/EnvironmentMetrics"]
        out += [
            f"{ROOT}/ThermalEquipment/CDUs/cdu{u}/SecondaryCoolantConnectors/1",
            f"{ROOT}/ThermalEquipment/CDUs/cdu{u}/Pumps/1",
        ]
    out += [
        f"{ROOT}/PowerEquipment/RackPDUs/row{r}/Metrics"
        for r in state.rows.get("row_id", np.array([])).tolist()
    ]
    return out
