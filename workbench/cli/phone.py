"""`workbench phone DIR --gpu a740[,mali-g610,…] [--csv OUT]`: a phone profile without a phone — each captured
dispatch's predicted time on the offline GPUs (`workbench.vendors.phone`), summed per kernel family, beside the
measured shares of a capture-fidelity table (--measured: a shares check, not a phone check) and the shares
ExecuTorch #22968 reports for Qwen3 decode on an Adreno 840 (--issue-22968)."""
from __future__ import annotations

import re
from pathlib import Path

#: ExecuTorch #22968 (Qwen3 decode on an Adreno 840): shares of decode GPU time, and the variants of each group.
ISSUE_22968 = {"4-bit GEMV": 0.74, "SDPA": 0.12, "RMSNorm": 0.05, "view copies": 0.05}
ISSUE_GROUPS = (("4-bit GEMV", r"q4gsw_linear|linear_q4gsw"), ("SDPA", r"sdpa"), ("RMSNorm", r"rms_norm"),
                ("view copies", r"view|copy"))


def register(subparsers) -> None:
    from ..vendors.phone import PHONES
    p = subparsers.add_parser("phone", help="a phone profile without a phone: each captured dispatch's predicted "
                                            "time on the offline GPUs, per kernel family")
    p.add_argument("dir", help="a capture folder (`workbench capture run`)")
    p.add_argument("--gpu", default="a740,mali-g610", help="comma-separated: " + ", ".join(PHONES))
    p.add_argument("--csv", help="write the rows (a row per dispatch × GPU) here; the families beside it")
    p.add_argument("--measured", help="a capture_fidelity*.csv (model, dispatch, family, etvk_us) or capture_coverage"
                                      ".csv (model, dispatch, phase, operator, variant, etvk_gpu_us): "
                                      "the dispatches it lists, their families and the shares check")
    p.add_argument("--model", help="the model's name in --measured (default: DIR's name)")
    p.add_argument("--issue-22968", action="store_true", help="group the families as #22968 does and compare, "
                                                              "as predicted and with a fitted per-dispatch floor")
    p.add_argument("--exclude", metavar="REGEX", help="leave out the dispatches whose variant or family matches "
                                                     "(e.g. a gather whose whole table counts as read)")
    p.add_argument("--floor-us", type=float, default=0.0, help="a fixed cost per dispatch, µs (default 0)")
    p.set_defaults(fn=cmd_phone)


def _variants(folder: Path, found) -> dict:
    """{dispatch: variant name} from the capture's list (dispatches.csv), else {} (the pipeline hash stands in)."""
    import pandas as pd
    listed = folder / "dispatches.csv"
    if not listed.is_file():
        return {}
    frame = pd.read_csv(listed)
    return {int(d): str(v).split("|")[0] for d, v in zip(frame["dispatch"], frame.get("variant", [])) if v == v}


def profile(folder, gpus, measured=None, model=None, floor_us: float = 0.0, exclude: str | None = None):
    """(rows, families, check): the per-dispatch rows, the per-family sums, the shares check (or None)."""
    import pandas as pd

    from ..capture import dispatches, stats
    from ..vendors import mesa, phone
    folder = Path(folder)
    phones = [phone.check_phone(g) for g in gpus]
    if not phones:
        raise ValueError("phone: expected --gpu with at least one GPU name, got none")
    if not 0 <= floor_us < 1e6:
        raise ValueError(f"phone: expected --floor-us between 0 and 1e6, got {floor_us}")
    if not mesa.is_set_up():
        raise ValueError(f"phone: expected Mesa's vendor compilers built in {mesa.cache_root()} "
                         "(`workbench compilers setup`), found none")
    found = dispatches(folder)
    families, table = {}, None
    if measured is not None:
        table = _measured(measured, model or folder.name)
        families = dict(zip(table["dispatch"].astype(int), table["family"]))
        found = [d for d in found if d.dispatch in families]
    names = _variants(folder, found)
    listed = [{"dispatch": d.dispatch, "pipeline": d.spirv_hash, "groups": tuple(d.groups),
               "local_size": _local(d), "family": families.get(d.dispatch, names.get(d.dispatch, d.spirv_hash)),
               "bytes": sum(phone.binding_bytes(b.size, b.format, b.extent) for b in d.bindings)} for d in found]
    if exclude:
        listed = [d for d in listed if not re.search(exclude, f"{names.get(d['dispatch'], '')} {d['family']}")]
        found = [d for d in found if d.dispatch in {x["dispatch"] for x in listed}]
        if table is not None:
            table = table[table["dispatch"].isin([x["dispatch"] for x in listed])]
    frame = stats.stats(found, gpus=[p.gpu for p in phones], driver=False, lint=False)
    rows = phone.predict(listed, frame, [p.gpu for p in phones], floor_us=floor_us)
    rows.insert(2, "variant", [names.get(int(n), "") for n in rows["dispatch"]])
    fam = phone.by_family(rows)
    check = None
    if measured is not None:
        on = table.set_index("dispatch")
        rows["measured_device"] = rows["dispatch"].map(on["device"]) if "device" in on else Path(measured).parent.name
        rows["measured_us"] = rows["dispatch"].map(on["measured_us"])
        rows["share_error_points"] = 100 * (rows["time_us"] / rows.groupby("gpu")["time_us"].transform("sum")
                                            - rows["measured_us"] / on["measured_us"].sum())
        shares = table.groupby("family")["measured_us"].sum() / table["measured_us"].sum()
        fam["measured_share"] = fam["family"].map(shares)
        fam["share_error_points"] = 100 * (fam["share"] - fam["measured_share"])
        check = fam
    return rows, fam, check


def _measured(path, model) -> "pd.DataFrame":
    """The execute dispatches of `model` in a capture_fidelity*.csv (etvk_us, family) or capture_coverage.csv
    (etvk_gpu_us, phase, operator, variant: the family by `capture_fidelity.family_of`), one row per dispatch with
    family and measured_us (ET-VK's own on-device µs). The model: `model`, else the table's only one."""
    import pandas as pd
    table = pd.read_csv(path)
    time = next((c for c in ("etvk_us", "etvk_gpu_us") if c in table), None)
    if not {"model", "dispatch"} <= set(table) or time is None or not {"family", "variant"} & set(table):
        raise ValueError(f"phone: expected --measured with columns model, dispatch, family or variant, etvk_us or "
                         f"etvk_gpu_us, got {', '.join(map(str, table.columns))}")
    models = list(dict.fromkeys(table["model"]))
    if model not in models and len(models) == 1:
        model = models[0]
    table = table[(table["model"] == model)]
    if "phase" in table:
        table = table[table["phase"] == "execute"]
    table = table.drop_duplicates("dispatch").copy()
    if not len(table):
        raise ValueError(f"phone: expected execute rows of model {model!r} in {path} (it has {', '.join(models)}), "
                         "got none")
    if "family" not in table:
        from ..etvk.model.capture_fidelity import family_of
        table["family"] = [family_of(o, v) for o, v in zip(table.get("operator", table["variant"]), table["variant"])]
    table["measured_us"] = pd.to_numeric(table[time], errors="coerce")
    return table


def _local(d):
    from ..capture.replay import launch_parameters
    try:
        return tuple(launch_parameters(d)[1])
    except ValueError:  # unreadable SPIR-V: its stats rows say why
        return (1, 1, 1)


def _group(variant, family) -> str:
    return next((g for g, rx in ISSUE_GROUPS if re.search(rx, f"{variant} {family}")), "other")


def issue_check(rows) -> "pd.DataFrame":
    """Per GPU, the predicted shares of #22968's four groups (variant names matched by ISSUE_GROUPS) beside its, as
    predicted and with the per-dispatch floor that fits them best (`phone.fit_floor`: the calibration)."""
    import pandas as pd

    from ..vendors import phone
    out = []
    for gpu, part in rows.groupby("gpu", sort=False):
        groups = [_group(v, f) for v, f in zip(part["variant"], part["family"])]
        floor, rms = phone.fit_floor(part, groups, ISSUE_22968)
        fitted = part["time_us"] - part["floor_us"] + floor
        for label, t in (("as predicted", part["time_us"]), (f"floor {floor:g} us", fitted)):
            share = t.groupby(groups).sum() / t.sum()
            for g in [*ISSUE_22968, "other"]:
                out.append({"gpu": gpu, "model": label, "group": g, "time_us": t[[x == g for x in groups]].sum(),
                            "share": share.get(g, 0.0), "reported_share": ISSUE_22968.get(g)})
    t = pd.DataFrame(out)
    t["error_points"] = 100 * (t["share"] - t["reported_share"])
    return t


def cmd_phone(args) -> int:
    import pandas as pd
    folder = Path(args.dir)
    if not folder.is_dir():
        raise ValueError(f"phone: expected a capture folder, got {args.dir!r} (not a folder)")
    rows, fam, check = profile(folder, [g for g in args.gpu.split(",") if g.strip()], args.measured, args.model,
                              args.floor_us, args.exclude)
    with pd.option_context("display.width", 200, "display.max_rows", 200, "display.max_columns", 20):
        print(fam.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
        if check is not None:
            print("(measured_share: the shares of the --measured table's device — a shares check, not a phone check)")
        if args.issue_22968:
            print(issue_check(rows).to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    if args.csv:
        out = Path(args.csv)
        out.parent.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out, index=False)
        fam.to_csv(out.with_name(out.stem + "_families.csv"), index=False)
        if args.issue_22968:
            issue_check(rows).to_csv(out.with_name(out.stem + "_issue_22968.csv"), index=False)
        print(f"wrote {out} ({len(rows)} rows) and {out.stem}_families.csv")
    return 0
