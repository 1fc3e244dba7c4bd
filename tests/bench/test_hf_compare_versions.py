#!/usr/bin/env python3
"""bench/gpu/hf_compare.py's choices by transformers version, without torch, transformers or a
model: the dtype keyword, the RoPE keywords, which models it compares (a stand-in transformers
module records the configs it is asked for).

    python3 tests/bench/test_hf_compare_versions.py
"""
import importlib.util
import os
import sys
import types
import unittest

sys.dont_write_bytecode = True  # no __pycache__ left in bench/gpu (it would travel to the GPU machine)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("hf_compare", os.path.join(ROOT, "bench", "gpu", "hf_compare.py"))
hf_compare = importlib.util.module_from_spec(spec)
torch_before = "torch" in sys.modules
spec.loader.exec_module(hf_compare)


def stand_in_transformers(version, qwen3=True):
    """A module with __version__ and config classes that keep their keywords."""
    class Config:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            for k, v in kwargs.items():
                setattr(self, k, v)
    module = types.SimpleNamespace(__version__=version, LlamaConfig=type("LlamaConfig", (Config,), {}))
    if qwen3:
        module.Qwen3Config = type("Qwen3Config", (Config,), {})
    return module


class Versions(unittest.TestCase):
    def test_parse_version(self):
        self.assertEqual(hf_compare.parse_version("4.46.3"), (4, 46, 3))
        self.assertEqual(hf_compare.parse_version("4.57.0.dev0"), (4, 57, 0))
        self.assertEqual(hf_compare.parse_version("5.0.0rc1"), (5, 0, 0))
        self.assertEqual(hf_compare.parse_version("5.1"), (5, 1, 0))

    def test_dtype_keyword(self):
        for version, want in (("4.40.0", "torch_dtype"), ("4.46.3", "torch_dtype"), ("4.51.3", "torch_dtype"),
                              ("4.55.4", "torch_dtype"), ("4.56.0", "dtype"), ("4.57.1", "dtype"),
                              ("4.57.0.dev0", "dtype"), ("5.0.0rc1", "dtype"), ("5.2.0", "dtype")):
            with self.subTest(version=version):
                self.assertEqual(hf_compare.dtype_kwarg(version), want)

    def test_qwen3(self):
        self.assertFalse(hf_compare.has_qwen3("4.50.3"))
        self.assertTrue(hf_compare.has_qwen3("4.51.0"))
        self.assertTrue(hf_compare.has_qwen3("5.0.0"))

    def test_rope_keywords(self):
        old = hf_compare.rope_kwargs("4.46.3", 500000.0, hf_compare.LLAMA3_ROPE)
        self.assertEqual(old["rope_theta"], 500000.0)
        self.assertEqual(old["rope_scaling"]["rope_type"], "llama3")
        self.assertNotIn("rope_parameters", old)
        self.assertEqual(hf_compare.rope_kwargs("4.56.1", 1e6), {"rope_theta": 1e6})
        new = hf_compare.rope_kwargs("5.0.0", 500000.0, hf_compare.LLAMA3_ROPE)
        self.assertEqual(set(new), {"rope_parameters"})
        self.assertEqual(new["rope_parameters"]["rope_theta"], 500000.0)
        self.assertEqual(new["rope_parameters"]["rope_type"], "llama3")
        self.assertEqual(hf_compare.rope_kwargs("5.1.0", 1e6), {"rope_parameters": {"rope_type": "default",
                                                                                    "rope_theta": 1e6}})
        self.assertNotIn("rope_theta", hf_compare.LLAMA3_ROPE)  # not altered by the calls

    def test_rope_type_of_either_layout(self):
        self.assertEqual(hf_compare.rope_type_of(types.SimpleNamespace(rope_scaling={"rope_type": "llama3"})), "llama3")
        self.assertEqual(hf_compare.rope_type_of(types.SimpleNamespace(rope_parameters={"rope_type": "llama3"})),
                         "llama3")
        self.assertEqual(hf_compare.rope_type_of(types.SimpleNamespace(rope_scaling=None)), "default")


class Plan(unittest.TestCase):
    def plan(self, version, qwen3=True):
        return {name: (build, why) for name, build, why in
                hf_compare.model_plan(stand_in_transformers(version, qwen3))}

    def test_old_transformers_compares_llama_alone(self):
        plan = self.plan("4.46.3", qwen3=False)
        build, why = plan["llama"]
        self.assertIsNone(why)
        config = build()
        self.assertEqual(type(config).__name__, "LlamaConfig")
        self.assertEqual(config.rope_scaling["rope_type"], "llama3")
        self.assertEqual(config.rope_theta, 500000.0)
        self.assertIsNone(plan["qwen3"][0])
        self.assertIn("no Qwen3Config", plan["qwen3"][1])

    def test_no_qwen3_class_even_when_the_version_says_so(self):
        self.assertIsNone(self.plan("4.52.0", qwen3=False)["qwen3"][0])

    def test_current_transformers_compares_both(self):
        plan = self.plan("4.57.1")
        self.assertEqual(plan["qwen3"][0]().rope_theta, 1000000.0)
        self.assertEqual(plan["llama"][0]().rope_scaling["rope_type"], "llama3")

    def test_transformers_5_uses_rope_parameters(self):
        plan = self.plan("5.0.0")
        llama, qwen3 = plan["llama"][0](), plan["qwen3"][0]()
        self.assertEqual(llama.rope_parameters["rope_type"], "llama3")
        self.assertEqual(llama.rope_parameters["rope_theta"], 500000.0)
        self.assertFalse(hasattr(llama, "rope_scaling"))
        self.assertEqual(qwen3.rope_parameters, {"rope_type": "default", "rope_theta": 1000000.0})

    def test_before_llama3_rope_llama_is_skipped(self):
        build, why = self.plan("4.42.4", qwen3=False)["llama"]
        self.assertIsNone(build)
        self.assertIn("llama3 RoPE", why)

    def test_import_does_not_need_torch(self):
        self.assertEqual("torch" in sys.modules, torch_before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
