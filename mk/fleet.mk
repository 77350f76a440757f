# mk/fleet.mk: `make fleet`, the lab on every partition of a Slurm cluster, then one comparison
# report; scripts/fleet submits the jobs, each of which is a `make` of this repository
# (models, report into FLEET_DIR/<partition>/, compare) run on a node.
# Reads from the Makefile: PROFILE; its own variables come from the command line: PARTITIONS,
# FLEET_DIR, FLEET_EXPERIMENTS, FLEET_MAKE, FLEET_ARRAY.

.PHONY: fleet

# The lab on every partition of a Slurm cluster, then one comparison (scripts/fleet, README):
#   make fleet PARTITIONS="cpu a100 h100" FLEET_DIR=/shared/inferlab [PROFILE=quick]
# FLEET_EXPERIMENTS="a b" runs only those experiments; FLEET_MAKE="CUDA=0" passes variables to
# the jobs' make; FLEET_ARRAY=N instead splits the needle sweep across an N-task job array.
fleet:
	@test -n "$(PARTITIONS)" -a -n "$(FLEET_DIR)" || { echo "usage: make fleet PARTITIONS=\"p1 p2 ...\" FLEET_DIR=DIR [PROFILE=quick]"; exit 2; }
	scripts/fleet --profile $(PROFILE) --experiments "$(FLEET_EXPERIMENTS)" --make "$(FLEET_MAKE)" \
	    $(if $(FLEET_ARRAY),--array $(FLEET_ARRAY)) $(FLEET_DIR) $(PARTITIONS)
