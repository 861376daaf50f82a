#!/bin/sh
# Copy man/prompts.fragment.roff (written next to the prompt registry) into exam-grade.1
# between its BEGIN/END markers; tests/commands/test_grade_cli_man.py fails when the two drift.
set -e
cd "$(dirname "$0")"
awk 'BEGIN{f="prompts.fragment.roff"} /^\.\\" BEGIN man\/prompts/{print; while((getline l < f)>0) if (l !~ /^\.\\"/) print l; skip=1; next} /^\.\\" END man\/prompts/{skip=0} !skip' exam-grade.1 > exam-grade.1.tmp
mv exam-grade.1.tmp exam-grade.1
