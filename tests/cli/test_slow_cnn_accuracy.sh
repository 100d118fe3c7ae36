#!/usr/bin/env bash
# Bounded form of acceptance 1: one epoch of the CNN on Fashion-MNIST in bf16 reaches
# >= 86.5% test accuracy (measured: 87.3% with seed 0; 5 epochs reach >= 91%; see docs/cli.md). Skipped (77) without the dataset.
source "$(dirname "$0")/lib.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skip: Fashion-MNIST is not installed"; exit 77; }
"$TC" train --model cnn --precision bf16 --epochs 1 --summary-json s.json --no-progress
acc=$(json_field s.json test_accuracy)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.865) }' || fail "cnn bf16 1 epoch: test accuracy $acc < 0.865"
pass "cnn bf16 1 epoch: test accuracy $acc"
