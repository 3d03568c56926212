"""The Vulkan runtime on the real default device (lavapipe in CI), validation layer on."""
import dataclasses
import resource
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from workbench import vk
from workbench.toolchain.shaders import compile_glsl

HERE = Path(__file__).parent / "shaders"


def shader_under_test(name: str):
    path = HERE / f"{name}.glsl"
    return compile_glsl(path.read_text(), name=name, source_path=path)


@pytest.fixture(scope="module")
def scale_add():
    return shader_under_test("scale_add")


def run_scale_add(device, spirv, values, *, mul=1, negate=False, add=0, offset=0, local=(64, 1, 1)):
    values = np.asarray(values, dtype=np.int32)
    with device.pipeline(spirv, spec_constants={3: mul, 4: negate}, local_size=local) as p, \
            device.buffer(values) as inp, device.buffer(nbytes=values.nbytes) as out, \
            device.uniform(np.array([values.size, offset, 0, 0], np.int32)) as ubo:
        timing = device.run(p, [out, inp, ubo], (values.size, 1, 1), struct.pack("<i", add))
        return out.download(np.int32), timing


# --- devices -----------------------------------------------------------------------------------------------------
def test_list_devices_describes_the_default(device):
    devices = vk.list_devices()
    assert devices, "no Vulkan device"
    info = device.info
    assert info.name and info.driver_name and info.api_version.count(".") == 2
    assert info.subgroup_size >= 1 and info.timestamp_period_ns > 0 and info.max_workgroup_invocations >= 128
    assert set(info.features) >= {"integer_dot_product", "storage_buffer_8bit", "pipeline_executable_properties"}
    assert vk.select_device(str(info.index), devices).name == info.name
    assert vk.select_device(info.name[:5].upper(), devices).name == info.name
    assert len(bytes.fromhex(info.device_uuid)) == 16  # VkPhysicalDeviceIDProperties.deviceUUID, in hex
    assert devices[info.index].device_uuid == info.device_uuid


def test_unknown_device_lists_the_devices():
    with pytest.raises(vk.DeviceNotFoundError, match=r"no Vulkan device matches 'no-such-gpu'.*devices: \[0\]"):
        vk.select_device("no-such-gpu")
    with pytest.raises(vk.DeviceNotFoundError, match="no Vulkan device with index 99"):
        vk.select_device(99)


def test_environment_variable_selects(monkeypatch):
    monkeypatch.setenv("WORKBENCH_DEVICE", "definitely-not-a-device")
    with pytest.raises(vk.DeviceNotFoundError, match="definitely-not-a-device"):
        vk.select_device()


def test_validation_messages_gathers_every_instance(device):
    assert device.instance in vk.instances()
    before = vk.validation_messages()  # what the process's instances hold now (the fixture checks each test's share)
    device.instance.messages.append("a message")
    try:
        after = vk.validation_messages()
        assert len(after) == len(before) + 1 and "a message" in after
    finally:
        device.instance.messages.remove("a message")


def test_cooperative_matrix_properties_are_plain_rows(device):
    rows = device.cooperative_matrix_properties()
    assert all(list(r) == ["extension", "M", "N", "K", "A", "B", "C", "D", "scope"] for r in rows)
    if not {"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix"} & set(device.info.extensions):
        assert rows == []


def test_missing_feature_is_named(device):
    with pytest.raises(ValueError, match="unknown feature 'warp_drive'"):
        device.require("warp_drive")
    missing = [name for name, ok in device.info.features.items() if not ok]
    if not missing:
        pytest.skip(f"{device.info.name} has every feature the runtime knows")
    with pytest.raises(vk.MissingFeatureError, match=missing[0]):
        device.require(missing[0])


# --- buffers and images ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.float16, np.int32, np.uint32, np.float32,
                                   np.int64, np.float64])
@pytest.mark.parametrize("count", [1, 3, 1000, 65537])
def test_buffer_round_trip_numpy(device, dtype, count):
    rng = np.random.default_rng(count)
    data = (rng.standard_normal(count) * 100).astype(dtype)
    with device.buffer(data) as buf:
        assert buf.nbytes == data.nbytes
        np.testing.assert_array_equal(buf.download(dtype), data)
        np.testing.assert_array_equal(buf.download(dtype, (count,)), data)


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.bfloat16, torch.int32, torch.float32])
def test_buffer_round_trip_torch(device, dtype):
    data = (torch.randn(3, 5, 7) * 50).to(dtype)
    with device.buffer(data) as buf:
        back = buf.to_torch(dtype, (3, 5, 7))
        assert back.dtype == dtype and torch.equal(back, data)


def test_staging_path_round_trip(device, monkeypatch):
    """Force the non-mappable path (what discrete GPUs take) on any device."""
    data = np.arange(4096, dtype=np.int32)
    with device.buffer(nbytes=data.nbytes) as buf:
        monkeypatch.setattr(buf, "_mapped", None)
        buf.upload(data)
        np.testing.assert_array_equal(buf.download(np.int32), data)


def test_buffer_errors_name_expected_and_given(device):
    with device.buffer(nbytes=16) as buf:
        with pytest.raises(ValueError, match="upload of 20 B at offset 0 does not fit buffer.* of 16 B"):
            buf.upload(np.zeros(5, np.int32))
        with pytest.raises(ValueError, match=r"asked for \(5,\) of int32 = 20 B from a buffer of 16 B"):
            buf.download(np.int32, (5,))
        with pytest.raises(ValueError, match="not a whole number of float64"):
            vk.Buffer(device, 12).download(np.float64)
    with pytest.raises(ValueError, match="at least 1 byte"):
        device.buffer(nbytes=0)
    with pytest.raises(TypeError, match="expected a numpy array, a torch CPU tensor or bytes, got list"):
        device.buffer([1, 2, 3])


@pytest.mark.parametrize("fmt,dtype", [("rgba32f", np.float32), ("rgba32i", np.int32), ("rgba16f", np.float16)])
def test_image_round_trip(device, fmt, dtype):
    extent = (5, 3, 7)
    data = (np.random.default_rng(0).standard_normal((7, 3, 5, 4)) * 100).astype(dtype)
    with device.image(extent, fmt) as img:
        np.testing.assert_array_equal(img.download(), np.zeros_like(data))  # images start cleared
        img.upload(data)
        np.testing.assert_array_equal(img.download(), data)
        with pytest.raises(ValueError, match=r"expects an array of shape \(7, 3, 5, 4\)"):
            img.upload(data[:1])


IMAGE_CASES = [("rgba32f", np.float32, ""), ("rgba32i", np.int32, "i"), ("rgba16f", np.float16, ""),
               ("rgba8i", np.int8, "i")]


def _texels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("extent", [(5, 3), (1, 1), (7, 2, 3)], ids=["2d", "2d-1x1", "3d"])
@pytest.mark.parametrize("fmt,dtype,prefix", IMAGE_CASES, ids=[c[0] for c in IMAGE_CASES])
def test_sampled_image_round_trip(device, fmt, dtype, prefix, extent):
    """Upload → texelFetch through a combined image sampler → imageStore → download, for every format ET-VK declares."""
    dims = len(extent)
    data = _texels(tuple(reversed(extent)) + (4,), dtype, seed=dims)
    spirv = compile_glsl((HERE / "sampled_copy.glsl").read_text(), name=f"sampled_copy_{fmt}_{dims}d",
                         defines={"DIMS": dims, "FORMAT": fmt, "IMAGE_T": f"{prefix}image{dims}D",
                                  "SAMPLER_T": f"{prefix}sampler{dims}D"})
    with device.image(extent, fmt) as src, device.image(extent, fmt) as dst, device.pipeline(spirv) as p:
        assert [(b.kind, b.dims) for b in p.bindings] == [("storage_image", dims), ("combined_image_sampler", dims)]
        src.upload(data)
        np.testing.assert_array_equal(src.download(), data)
        device.run(p, [dst, src], extent)
        np.testing.assert_array_equal(dst.download(), data)


def test_sampled_image_binding_errors(device):
    spirv = compile_glsl((HERE / "sampled_copy.glsl").read_text(), name="sampled_copy_2d",
                         defines={"DIMS": 2, "FORMAT": "rgba32f", "IMAGE_T": "image2D", "SAMPLER_T": "sampler2D"})
    with device.pipeline(spirv) as p, device.image((4, 4)) as img2, device.image((4, 4, 1)) as img3, \
            device.buffer(nbytes=64) as buf:
        with pytest.raises(vk.BindingError, match=r"binding 1 \(in_texture\) needs a 2-D image, got the 3-D"):
            device.run(p, [img2, img3], (4, 4))
        with pytest.raises(vk.BindingError, match=r"binding 1 \(in_texture\) needs a 2-D combined_image_sampler"):
            device.run(p, [img2, buf], (4, 4))
    with pytest.raises(ValueError, match="2 or 3 positive ints"):
        device.image((4,))
    with pytest.raises(ValueError, match="maxImageDimension2D"):
        device.image((device.info.max_image_dimension_2d + 1, 1))


def test_image_dispatch(device):
    data = np.random.default_rng(1).standard_normal((2, 6, 9, 4)).astype(np.float32)
    spirv = shader_under_test("image_scale")
    with device.image((9, 6, 2)) as src, device.image((9, 6, 2)) as dst, device.pipeline(spirv) as p:
        src.upload(data)
        assert p.local_size == (4, 4, 1)  # the literal local size, reflected
        device.run(p, [dst, src], (9, 6, 2))
        np.testing.assert_array_equal(dst.download(), data * 2)


# --- pipelines and dispatch --------------------------------------------------------------------------------------
def test_reflection(device, scale_add):
    with device.pipeline(scale_add) as p:
        assert [(b.binding, b.kind) for b in p.bindings] == [
            (0, "storage_buffer"), (1, "storage_buffer"), (2, "uniform_buffer")]
        assert p.push_constant_size == 4
        assert p.reflection.spec_constants == {0: "uint", 1: "uint", 2: "uint", 3: "int", 4: "bool"}
        assert p.local_size == (64, 1, 1)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 4099])
def test_dispatch_element_by_element(device, scale_add, n):
    values = np.random.default_rng(n).integers(-1000, 1000, n)
    out, timing = run_scale_add(device, scale_add, values)
    np.testing.assert_array_equal(out, values)
    assert timing.groups == (-(-n // 64), 1, 1)


def test_specialization_and_push_constants_change_results(device, scale_add):
    values = np.arange(-50, 150)
    out, _ = run_scale_add(device, scale_add, values, mul=3, add=7, offset=-2)
    np.testing.assert_array_equal(out, values * 3 + 7 - 2)
    out, _ = run_scale_add(device, scale_add, values, mul=-2, negate=True, add=1)
    np.testing.assert_array_equal(out, -(values * -2 + 1))
    out, _ = run_scale_add(device, scale_add, values, mul=5, local=(32, 1, 1))
    np.testing.assert_array_equal(out, values * 5)


def test_bad_dispatches_get_clear_errors(device, scale_add):
    with device.pipeline(scale_add) as p, device.buffer(nbytes=64) as a, device.buffer(nbytes=64) as b, \
            device.uniform(np.zeros(4, np.int32)) as ubo, device.record() as rec:
        with pytest.raises(vk.BindingError, match=r"expected 3 resources \[0:Out \(storage_buffer\), "
                                                  r"1:In \(storage_buffer\), 2:params \(uniform_buffer\)\], got 2"):
            rec.dispatch(p, [a, b], (16,), struct.pack("<i", 0))
        with pytest.raises(vk.BindingError, match=r"binding 2 \(params\) needs a uniform_buffer"):
            rec.dispatch(p, [a, b, b], (16,), struct.pack("<i", 0))
        with pytest.raises(ValueError, match="push constants are 4 B, got 8 B"):
            rec.dispatch(p, [a, b, ubo], (16,), struct.pack("<ii", 0, 0))
        with pytest.raises(ValueError, match="global size must be positive"):
            rec.dispatch(p, [a, b, ubo], (0,), struct.pack("<i", 0))
    with pytest.raises(vk.BindingError, match=r"no compute entry point 'nope' in the module \(it has \['main'\]\)"):
        device.pipeline(scale_add, entry_point="nope")
    with pytest.raises(ValueError, match=r"specialization constant 3 \(int\) takes 4 bytes, got 2"):
        device.pipeline(scale_add, spec_constants={3: b"\x01\x00"})
    with pytest.raises(TypeError, match="specialization constant 4 is a bool"):
        device.pipeline(scale_add, spec_constants={4: 7})
    with pytest.raises(ValueError, match="exceeds the device's limits"):
        device.pipeline(scale_add, local_size=(4096, 1, 1))
    with pytest.raises(ValueError, match="not a SPIR-V module"):
        device.pipeline(b"\x00" * 64)
    with pytest.raises(vk.BindingError, match="fixes local size"):
        device.pipeline(shader_under_test("image_scale"), local_size=(8, 8, 1))


def test_closed_resource_is_refused(device, scale_add):
    with device.pipeline(scale_add) as p, device.buffer(nbytes=64) as a, \
            device.uniform(np.zeros(4, np.int32)) as ubo:
        b = device.buffer(nbytes=64)
        b.close()
        with pytest.raises(vk.BindingError, match="closed resource"):
            device.run(p, [a, b, ubo], (16,), struct.pack("<i", 0))


# --- recording and timestamps ------------------------------------------------------------------------------------
def test_timestamps_positive_and_in_order(device, scale_add):
    values = np.arange(1 << 16)
    with device.pipeline(scale_add, spec_constants={3: 2}) as p, device.buffer(values.astype(np.int32)) as a, \
            device.buffer(nbytes=values.nbytes // 2) as b, device.buffer(nbytes=values.nbytes // 2) as c, \
            device.uniform(np.array([values.size, 0, 0, 0], np.int32)) as ubo:
        with device.record("chain") as rec:
            rec.dispatch(p, [b, a, ubo], (values.size,), struct.pack("<i", 1), label="first")
            rec.copy(b, c, label="copy")
            rec.dispatch(p, [a, c, ubo], (values.size,), struct.pack("<i", 0), label="second")
            timings = rec.submit()
            again = rec.submit()  # a recording can be re-submitted
        assert [t.label for t in timings] == ["first", "copy", "second"]
        for t in timings + again:
            assert t.gpu_ns > 0
        starts = [t.start_ns for t in timings]
        ends = [t.end_ns for t in timings]
        assert starts == sorted(starts) and all(s <= e for s, e in zip(starts, ends))
        assert all(e <= s for e, s in zip(ends[:-1], starts[1:])), "barriers order the commands"
        assert rec.host_ns > 0
        # x → (x*2+1)*2 per submit: each dispatch saw the previous one's result through the copy
        once = (values * 2 + 1) * 2
        np.testing.assert_array_equal(a.download(np.int32), (once * 2 + 1) * 2)


@pytest.mark.parametrize("barrier_timed, full", [(False, False), (True, False), (True, True)])
def test_barrier_placement_against_timestamps(device, scale_add, monkeypatch, barrier_timed, full):
    """ET-VK's QueryPool writes a dispatch's start timestamp before its barrier: `barrier_timed` records that order,
    and the default keeps the barrier outside both intervals. The command buffer's calls are logged as recorded."""
    from workbench.vk import recording
    calls, stages = [], []
    for name in ("vkCmdWriteTimestamp", "vkCmdPipelineBarrier", "vkCmdDispatch"):
        real = getattr(recording.vk, name)
        monkeypatch.setattr(recording.vk, name,
                            lambda *a, _real=real, _name=name: (calls.append(_name[5:]), _real(*a))[1])
    real_barrier = recording.vk.vkCmdPipelineBarrier
    monkeypatch.setattr(recording.vk, "vkCmdPipelineBarrier",
                        lambda *a: (stages.append((a[1], a[2], a[5][0].srcAccessMask)), real_barrier(*a))[1])
    values = np.arange(256)
    with device.pipeline(scale_add, spec_constants={3: 2}) as p, device.buffer(values.astype(np.int32)) as a, \
            device.buffer(nbytes=values.nbytes // 2) as b, \
            device.uniform(np.array([values.size, 0, 0, 0], np.int32)) as ubo:
        with device.record("two", barrier_timed=barrier_timed, full_barriers=full) as rec:
            rec.dispatch(p, [b, a, ubo], (values.size,), struct.pack("<i", 1))
            rec.dispatch(p, [a, b, ubo], (values.size,), struct.pack("<i", 0))
            timings = rec.submit()
        got = a.download(np.int32)
    first = ["WriteTimestamp", "Dispatch", "WriteTimestamp"]
    second = (["WriteTimestamp", "PipelineBarrier"] if barrier_timed else ["PipelineBarrier", "WriteTimestamp"]) \
        + ["Dispatch", "WriteTimestamp"]
    assert calls == first + second
    vk = recording.vk
    want = ((vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
            if full else (recording.COMPUTE_AND_TRANSFER, recording.ALL_ACCESS))
    assert stages == [(want[0], want[0], want[1])]
    assert all(t.gpu_ns > 0 for t in timings)
    np.testing.assert_array_equal(got, (values * 2 + 1) * 2)


def test_fence_wait_times_out(device, monkeypatch):
    spirv = shader_under_test("spin")
    with device.pipeline(spirv) as p, device.buffer(nbytes=64 * 64 * 4) as out:
        rec = device.record("spin")
        rec.dispatch(p, [out], (64 * 64,), struct.pack("<I", 20_000_000))
        with pytest.raises(vk.FenceTimeoutError, match=r"did not finish within 0\.001 s"):
            rec.submit(timeout_s=0.001)
        with pytest.raises(vk.FenceTimeoutError, match="timed out earlier"):
            rec.submit()
        import vulkan
        vulkan.vkDeviceWaitIdle(device.handle)  # let it finish, then the recording can be released
        rec.close()
        assert rec._cmd is None


def test_statistics_capture(device, scale_add):
    if not device.info.features["pipeline_executable_properties"]:
        with pytest.raises(vk.MissingFeatureError, match="VK_KHR_pipeline_executable_properties"):
            device.pipeline(scale_add, capture_statistics=True)
        pytest.skip(f"{device.info.name} ({device.info.driver_name}) does not expose "
                    "VK_KHR_pipeline_executable_properties: no driver statistics to read")
    with device.pipeline(scale_add, capture_statistics=True) as p:
        stats = p.statistics()
        assert stats and all(isinstance(k, str) for k in stats)


def test_no_leaks_over_many_pipelines_and_dispatches(device, scale_add):
    baseline = device.live_objects()
    values = np.arange(256, dtype=np.int32)
    with device.buffer(values) as inp, device.buffer(nbytes=values.nbytes) as out, \
            device.uniform(np.array([256, 0, 0, 0], np.int32)) as ubo:
        rss_before = None
        for i in range(1000):
            with device.pipeline(scale_add, spec_constants={3: i % 7}) as p:
                device.run(p, [out, inp, ubo], (256,), struct.pack("<i", i))
            if i == 100:  # after warm-up allocations
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        np.testing.assert_array_equal(out.download(np.int32), values * (999 % 7) + 999)
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert device.live_objects() == baseline
    assert growth_kib < 64 * 1024, f"resident memory grew by {growth_kib} KiB over 900 pipelines + dispatches"


def test_local_size_id_at_vulkan_1_3(device):
    """glslang writes local_size_*_id as the LocalSizeId execution mode for Vulkan 1.3 targets (no WorkgroupSize
    built-in): the runtime must still specialise ids 0-2 (else every group has 1 thread: the cooperative-matrix
    shaders stored zeros on the H200) and enable maintenance4, which the validation layer requires for it."""
    src = ("#version 450\nlayout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;\n"
           "layout(set = 0, binding = 0) buffer B { uint v[]; };\n"
           "void main() { v[gl_GlobalInvocationID.x] = gl_WorkGroupSize.x * 100 + gl_LocalInvocationID.x; }\n")
    spirv = compile_glsl(src, name="local_size_id", target_env="vulkan1.3")
    if not device.info.features.get("maintenance4"):
        with pytest.raises(vk.MissingFeatureError, match="LocalSizeId.*maintenance4"):
            device.pipeline(spirv, local_size=(32, 1, 1))
        return
    with device.pipeline(spirv, local_size=(32, 1, 1)) as p, device.buffer(nbytes=4 * 64) as out:
        assert p.reflection.local_size_id and p.reflection.local_size_from_spec
        device.run(p, [out], (64, 1, 1))
        np.testing.assert_array_equal(out.download(np.uint32), 3200 + np.arange(64) % 32)


@pytest.mark.parametrize("target", ["vulkan1.1", "vulkan1.3"])
def test_local_size_from_any_specialization_ids(device, target):
    """ncnn takes its local size from specialization constants 233, 234, 235 (a WorkgroupSize built-in made of
    them, or LocalSizeId at Vulkan 1.3): the reflection names those ids and their defaults, the pipeline specialises
    them, and an axis left literal stays fixed."""
    src = ("#version 450\nlayout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;\n"
           "layout(set = 0, binding = 0) buffer B { uint v[]; };\n"
           "void main() { v[gl_GlobalInvocationID.x] = gl_WorkGroupSize.x * 100 + gl_WorkGroupSize.y * 10 "
           "+ gl_WorkGroupSize.z; }\n")
    spirv = compile_glsl(src, name=f"ncnn_ids_{target}", target_env=target)
    r = vk.spirv.reflect(spirv.code)
    assert r.local_size_from_spec and r.local_size_spec_ids == (233, 234, 235) and r.local_size_default == (1, 1, 1)
    if target == "vulkan1.3" and not device.info.features.get("maintenance4"):
        return
    with device.pipeline(spirv, local_size=(16, 2, 1)) as p, device.buffer(nbytes=4 * 64) as out:
        device.run(p, [out], (64, 2, 1))
        assert (out.download(np.uint32) == 1621).all()
    one_axis = src.replace(", local_size_y_id = 234, local_size_z_id = 235", ", local_size_y = 2")
    r = vk.spirv.reflect(compile_glsl(one_axis, name=f"ncnn_x_{target}", target_env=target).code)
    assert r.local_size_spec_ids == (233, None, None) and r.local_size_default == (1, 2, 1)
    with pytest.raises(vk.BindingError, match="fixes local size axis y at 2"):
        device.pipeline(compile_glsl(one_axis, name=f"ncnn_x_{target}", target_env=target), local_size=(8, 1, 1))


def test_a_refused_pipeline_leaves_nothing_behind():
    """A pipeline refused after reflection (an entry point the module lacks) creates no Vulkan object: the device
    it was asked of closes without the validation layer's 'child objects not destroyed'."""
    from workbench.toolchain.shaders import compile_shader
    spv = compile_shader("copy")
    with vk.Device() as dev:
        with pytest.raises(vk.BindingError, match="no compute entry point 'other'"):
            dev.pipeline(spv, entry_point="other")
        assert dev.live_objects() == 0
    assert [m for m in dev.instance.messages if "vkDestroyDevice" in m] == []


# --- the one launch path -----------------------------------------------------------------------------------------
def test_undeclared_specialization_constants_are_dropped(device, scale_add):
    """Vulkan ignores constant ids a module does not declare (ET-VK passes its whole list): so does the pipeline,
    saying which it dropped; the kept ones still specialize."""
    values = np.arange(32, dtype=np.int32)
    with device.pipeline(scale_add, spec_constants={3: 3, 9: 1, 12: 2.5}) as p:
        assert p.spec_constants == {3: 3} and p.dropped_spec_constants == [9, 12]
    assert vk.spirv.declared(scale_add, {3: 3, 9: 1}) == {3: 3}
    out, _ = run_scale_add(device, scale_add, values, mul=3)
    np.testing.assert_array_equal(out, values * 3)


def test_a_launch_as_a_capture_describes_it(device, scale_add):
    """A Launch takes what a captured dispatch holds: SPIR-V bytes, entry point, constants as raw bytes, push
    constants, resources by binding number, work-group counts; it computes what the same dispatch recorded by hand
    computes, and equal programs share one pipeline."""
    values = np.arange(200, dtype=np.int32)
    with device.buffer(values) as inp, device.buffer(nbytes=values.nbytes) as out, \
            device.buffer(nbytes=values.nbytes) as out2, \
            device.uniform(np.array([values.size, 5, 0, 0], np.int32)) as ubo:
        code = bytes(scale_add.code)
        first = vk.Launch(code, {2: ubo, 1: inp, 0: out, 7: inp}, groups=(4, 1, 1), push_constants=struct.pack("<i", 1),
                          spec_constants={3: struct.pack("<i", 2), 4: b"\x01\x00\x00\x00", 9: 1},
                          local_size=(64, 1, 1), entry_point="main", label="captured")
        second = vk.Launch(code, [out2, inp, ubo], global_size=(200,), push_constants=struct.pack("<i", 1),
                           spec_constants={3: 2, 4: True}, local_size=(64, 1, 1))
        again = dataclasses.replace(second, label="again")
        with vk.Launches(device, [first, second, again]) as launches:
            assert launches.pipeline_of(2) is launches.pipeline_of(1) is not launches.pipeline_of(0)
            timings = launches.run()
        assert [t.label for t in timings] == ["captured", "kernel", "again"] and timings[0].groups == (4, 1, 1)
        want = -(values * 2 + 1 + 5)
        np.testing.assert_array_equal(out.download(np.int32), want)
        np.testing.assert_array_equal(out2.download(np.int32), want)
        with vk.Launches(device, [vk.Launch(code, {0: out, 1: inp}, groups=(1,))]) as missing, \
                pytest.raises(vk.BindingError, match=r"no resource for binding 2:params \(uniform_buffer\); given "
                                                     r"bindings \[0, 1\]"):
            missing.run()
    with pytest.raises(ValueError, match="give its size as groups or as global_size, not both"):
        vk.Launch(code, [], groups=(1,), global_size=(64,))


@pytest.mark.parametrize("tiling", ["optimal", "linear"])
def test_recorded_barriers_move_image_layouts_as_a_program_did(device, tiling):
    """`vk.Barrier`s as a captured program recorded them (ET-VK's: per-image barriers moving a sampled tensor to
    SHADER_READ_ONLY_OPTIMAL, an output from UNDEFINED): each dispatch binds its images in the layout they are in,
    the data flows through both dispatches on every submit, and the images are back in GENERAL after (a download
    reads them); validation (on in tests) checks every layout. Linear tiling as ET-VK makes images where it can."""
    extent = (5, 3, 2)
    data = _texels(tuple(reversed(extent)) + (4,), np.float32, seed=7)
    spirv = compile_glsl((HERE / "sampled_copy.glsl").read_text(), name="sampled_copy_3d_barriers",
                         defines={"DIMS": 3, "FORMAT": "rgba32f", "IMAGE_T": "image3D", "SAMPLER_T": "sampler3D"})
    try:
        images = [device.image(extent, "rgba32f", name=f"t{k}", tiling=tiling) for k in range(3)]
    except ValueError as exc:
        pytest.skip(f"{device.info.name}: {exc}")
    a, b, c = images
    import vulkan as v
    read, write = v.VK_ACCESS_SHADER_READ_BIT, v.VK_ACCESS_SHADER_WRITE_BIT
    general, reading = v.VK_IMAGE_LAYOUT_GENERAL, v.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL
    undefined, compute = v.VK_IMAGE_LAYOUT_UNDEFINED, v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    first = vk.Barrier(compute, compute, images=((a, 0, read, general, reading), (b, 0, write, undefined, general)))
    second = vk.Barrier(compute, compute, images=((b, write, read, general, reading),
                                                  (c, 0, write, undefined, general)))
    try:
        a.upload(data)
        with device.pipeline(spirv) as p, device.record("captured barriers", barrier_timed=True) as rec:
            rec.dispatch(p, [b, a], extent, barrier=first)
            rec.dispatch(p, [c, b], extent, barrier=[second])
            for _ in range(2):
                rec.submit()
                np.testing.assert_array_equal(c.download(), data)
            np.testing.assert_array_equal(a.download(), data)
        assert a.tiling == tiling
    finally:
        for image in images:
            image.close()
    with pytest.raises(ValueError, match="image tiling is one of"):
        device.image(extent, "rgba32f", tiling="swizzled")


def test_a_programs_own_sampler(device):
    """`Device.sampler(dims, fields)`: a captured program's sampler (fields by VK_* name, as converted), made once
    and kept apart from the device's own; a field Vulkan does not have is refused in one line."""
    etvk = {"addressModeU": "VK_SAMPLER_ADDRESS_MODE_REPEAT", "maxLod": 1000.0, "unnormalizedCoordinates": False,
            "borderColor": "VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK"}
    own = device.sampler(2, etvk)
    assert own == device.sampler(2, dict(etvk)) and own != device.sampler(2)
    with pytest.raises(ValueError, match="expected VkSamplerCreateInfo fields with Vulkan values, got swizzle"):
        device.sampler(2, {"swizzle": 1})
    with pytest.raises(ValueError, match="got addressModeU=None"):
        device.sampler(2, {"addressModeU": "VK_NO_SUCH_MODE"})


def test_an_arena_holds_many_resources_in_few_blocks(device, scale_add):
    """`vk.Arena`: buffers and images bound one after another into shared blocks (as VMA suballocates ET-VK's
    tensors); each reads and writes its own range, a dispatch over them is right, a resource too big for a block
    gets a block of its own, closing the resources then the arena frees everything."""
    values = np.random.default_rng(3).integers(-1000, 1000, 1000).astype(np.int32)
    texels = _texels((2, 3, 5, 4), np.float32, seed=2)
    with device.arena(block_bytes=1 << 16) as arena:
        inp, out = device.buffer(values, arena=arena), device.buffer(nbytes=values.nbytes, arena=arena)
        ubo = device.uniform(np.array([values.size, 7, 0, 0], np.int32), arena=arena)
        big = device.buffer(nbytes=1 << 17, arena=arena)  # larger than a block
        image = device.image((5, 3, 2), arena=arena).upload(texels)
        assert inp.memory == out.memory == ubo.memory and big.memory != inp.memory
        with device.pipeline(scale_add, spec_constants={3: 3}, local_size=(64, 1, 1)) as p:
            device.run(p, [out, inp, ubo], (values.size,), push_constants=np.int32([5]))
        np.testing.assert_array_equal(inp.download(np.int32), values)  # neighbours untouched
        np.testing.assert_array_equal(out.download(np.int32), values * 3 + 5 + 7)
        np.testing.assert_array_equal(image.download(), texels)
        for r in (inp, out, ubo, big, image):
            r.close()
