/* container.h: which container a process runs in, from /proc/PID/cgroup.
 * SONiC runs each service in a docker container; the name (swss, syncd,
 * bgp, ...) is what operators look for, so it is preferred over the id. */
#ifndef FP_CONTAINER_H
#define FP_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

/* fp_container_id_from_cgroup: the container id (64 hex digits) in one
 * cgroup path such as "/system.slice/docker-ID.scope" or "/docker/ID",
 * copied into id (>= 65 bytes).  0 or -ENOENT. */
int fp_container_id_from_cgroup(const char *cgroup_path, char *id);

/* fp_container_name: the container of pid: its docker name when
 * docker_root ("/var/lib/docker") knows it, else the first 12 digits of its
 * id, else "" (not in a container).  Never fails. */
void fp_container_name(const char *proc, const char *docker_root, uint32_t pid, char *buf,
		       size_t len);

#endif
