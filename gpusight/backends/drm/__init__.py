"""What the amdgpu and Intel backends share: DRM cards in sysfs, hwmon sensors and per-client DRM fdinfo."""
