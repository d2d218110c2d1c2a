"""Test helpers shared by several test files: real processes (``procs``) and the fake NVML library (``fake_nvml``)."""
