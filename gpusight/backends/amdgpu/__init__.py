"""The amdgpu backend: AMD GPUs read from sysfs, hwmon, DRM fdinfo and KFD, with no ROCm library needed."""
