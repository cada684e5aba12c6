/* container.c: container ids from cgroup paths, names from docker's state. */
#include "container.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

#define ID_LEN 64
#define CONFIG_MAX (1 << 20) /* bytes of config.v2.json read at most */

int fp_container_id_from_cgroup(const char *path, char *id)
{
	const char *p;

	/* The id is the last run of 64 hex digits bounded by '/', '-' or '.'
	 * (docker, containerd, cri-o and podman all use that shape). */
	for (p = path + strlen(path); p > path; p--) {
		const char *start = p - 1;
		size_t n = 0;

		while (start >= path && isxdigit((unsigned char)*start) && n <= ID_LEN)
			start--, n++;
		if (n == ID_LEN && start >= path && strchr("/-", *start) &&
		    (*p == '\0' || *p == '.' || *p == '/')) {
			memcpy(id, start + 1, ID_LEN);
			id[ID_LEN] = '\0';
			return 0;
		}
		p = start + 1;
	}
	return -ENOENT;
}

/* Docker keeps each container's name in config.v2.json as "Name":"/NAME",
 * after "State" and "Config": health-check logs, labels and environments
 * can put it well past the first few KB, so the whole file is read. */
static int docker_name(const char *docker_root, const char *id, char *buf, size_t len)
{
	char path[512], *data = NULL, *p, *end;
	size_t n = 0, cap = 0;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "%s/containers/%s/config.v2.json", docker_root, id);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (!feof(f) && !ferror(f) && cap < CONFIG_MAX) {
		if (fp_vec_reserve(&data, &cap, cap ? cap * 2 : 16384, 1))
			break;
		n += fread(data + n, 1, cap - 1 - n, f);
	}
	fclose(f);
	if (!data)
		return -ENOENT;
	data[n] = '\0';
	p = strstr(data, "\"Name\":\"/");
	if (p) {
		p += strlen("\"Name\":\"/");
		end = strchr(p, '"');
		if (end && end != p && (size_t)(end - p) < len) {
			memcpy(buf, p, end - p);
			buf[end - p] = '\0';
			err = 0;
		}
	}
	free(data);
	return err;
}

void fp_container_name(const char *proc, const char *docker_root, uint32_t pid, char *buf,
		       size_t len)
{
	char path[64], line[1024], id[ID_LEN + 1];
	int found = 0;
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/cgroup", proc, pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (!found && fgets(line, sizeof(line), f)) {
		char *cg = strchr(line, ':');
		cg = cg ? strchr(cg + 1, ':') : NULL;
		if (!cg)
			continue;
		cg[strcspn(cg, "\n")] = '\0';
		found = fp_container_id_from_cgroup(cg + 1, id) == 0;
	}
	fclose(f);
	if (!found)
		return;
	if (docker_name(docker_root, id, buf, len) != 0)
		snprintf(buf, len, "%.12s", id);
}
