-- 0015_h200_confirmed.sql - the H200-141GB MIG profiles checked against real
-- hardware: `nvidia-smi mig -lgip` / `-lgipp` on an H200, driver 580.159.04
-- (tests/fixtures/nvidia-smi/linux-x86_64__nvidia-h200__580.159.04.txt).
-- Ids, SMs, instance counts and placements of all seven profiles are as the
-- catalog had them; 1g.35gb holds 32.50 GiB like 2g.35gb (was 33024 MiB).
UPDATE mig_profiles SET confirmed = true WHERE model = 'H200-141GB';
UPDATE mig_profiles SET memory_mib = 33280 WHERE model = 'H200-141GB' AND name = '1g.35gb';
