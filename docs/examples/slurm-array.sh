#!/bin/bash
# Point sharding on Slurm: a job array runs a share of a spec's points per
# task (each task on its own GPU node, starting its own server per model
# and precision); a job that waits for every task merges the shares.
#
# Run it from the folder that holds the spec, on a machine that can submit
# jobs (a login node), with infer-bench on the PATH there and on the nodes:
#
#   docs/examples/slurm-array.sh [SPEC]     # SPEC: specs/fleet.toml by default
#
# Run so, it submits itself: it
#   - sizes the array from the spec, one task per point
#     (`infer-bench plan SPEC --count`; SHARDS=N in the environment asks for
#     N tasks instead: fewer share the points out, more leave some tasks
#     with none, which exit 0 with an empty share that merge accepts);
#   - creates logs/ first: Slurm opens each task's log before the task
#     starts, and a folder nothing creates fails every task with no log;
#   - submits the merge with --dependency=afterany, so that it runs after
#     every task however each ended: a share that is missing or did not
#     finish shows in the merged results as pending points, and the merge
#     exits 3 (with afterok, one failed task would leave the merge waiting
#     forever, DependencyNeverSatisfied).
# Each submission writes under results/<spec name>-<array job id>/:
# shard-K/ per task and merged/ (`infer-bench report` reads it). As an array
# task (SLURM_ARRAY_TASK_ID set), the script runs share K of N.
#
# infer-bench on the nodes: `pip install infer-bench` into a venv on the
# shared filesystem, or the release image through the cluster's container
# runtime; with Apptainer, put in front of each `infer-bench` below
#   apptainer exec --bind "$PWD" docker://ghcr.io/infer-bench/infer-bench:0.1.0
# and with pyxis/enroot, give srun
#   --container-image=ghcr.io/infer-bench/infer-bench:0.1.0 --container-mounts="$PWD:$PWD"
#
# tests/recipes.rs runs this script as written on a one-node cluster
# (scripts/slurm-single-node) against specs/fleet.toml.
#
#SBATCH --job-name=infer-bench
#SBATCH --nodes=1
#SBATCH --gpus-per-node=1
#SBATCH --time=04:00:00
set -euo pipefail
SPEC=${1:-specs/fleet.toml}
NAME=$(basename "$SPEC" .toml)

if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
    N=${SHARDS:-$(infer-bench plan "$SPEC" --count)}
    mkdir -p logs
    ARRAY=$(sbatch --parsable --array="1-$N" --output="logs/%x-%A_%a.out" "$0" "$SPEC")
    ARRAY=${ARRAY%%;*}
    OUT="results/$NAME-$ARRAY"
    MERGE=$(sbatch --parsable --dependency="afterany:$ARRAY" \
        --job-name=infer-bench-merge --output="logs/%x-%j.out" \
        --wrap="infer-bench merge $OUT/shard-* --out $OUT/merged")
    echo "array job $ARRAY: $N tasks running shares of $SPEC into $OUT/shard-K"
    echo "merge job ${MERGE%%;*}: after every task, into $OUT/merged"
    echo "logs: logs/"
    exit 0
fi

K=$SLURM_ARRAY_TASK_ID
N=$SLURM_ARRAY_TASK_COUNT
exec infer-bench run "$SPEC" --allow-launch \
    --partition "slice:$K/$N" \
    --out "results/$NAME-$SLURM_ARRAY_JOB_ID/shard-$K"

# Load sharding on Slurm instead: one job of N tasks started together
# (srun), all against one server, with an agreed start. The spec's target
# is that server (kind = "openai"): agents refuse the built-in simulator,
# which each would start for itself (`infer-bench sim-server` serves one).
#   START_AT=$(date -u -d '+60 seconds' +%Y-%m-%dT%H:%M:%SZ)
#   srun --ntasks=4 bash -c 'infer-bench run SPEC \
#       --agent $((SLURM_PROCID + 1))/$SLURM_NTASKS --start-at '"$START_AT"' \
#       --out results/agent-$((SLURM_PROCID + 1))'
#   infer-bench merge results/agent-* --out results/merged
