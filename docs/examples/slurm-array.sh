#!/bin/bash
# Point sharding on Slurm: a job array runs a share of the matrix's points
# per task (each task on its own GPU node, launching its own server per
# model and precision); a dependent job merges them.
#
#   jid=$(sbatch --parsable docs/examples/slurm-array.sh)
#   sbatch --dependency=afterok:$jid --wrap \
#     'infer-bench merge results/sweep-shard-* --out results/sweep'
#
#SBATCH --job-name=infer-bench
#SBATCH --array=1-8
#SBATCH --nodes=1
#SBATCH --gpus-per-node=1
#SBATCH --time=04:00:00
#SBATCH --output=logs/infer-bench-%A_%a.out
set -euo pipefail
K=$SLURM_ARRAY_TASK_ID
N=$SLURM_ARRAY_TASK_COUNT
exec infer-bench run specs/llama-cpp.toml --allow-launch \
    --partition "slice:$K/$N" \
    --out "results/sweep-shard-$K"
# Load sharding on Slurm instead: one job of N tasks started together
# (srun), all against one server, with an agreed start:
#   START_AT=$(date -u -d '+60 seconds' +%Y-%m-%dT%H:%M:%SZ)
#   srun --ntasks=4 bash -c 'infer-bench run specs/fleet.toml \
#       --agent $((SLURM_PROCID + 1))/$SLURM_NTASKS --start-at '"$START_AT"' \
#       --out results/agent-$((SLURM_PROCID + 1))'
