/* container_test.c: container ids from cgroup paths and container names
 * from a (fake) procfs and docker state (device/container.c). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "container.h"

#define ID "3f4e1c9a0b2d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"
#define ID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const struct {
	const char *path;
	int err;
	const char *id;
} cgroup_cases[] = {
	/* docker under systemd (cgroup v2 and v1 with the systemd driver) */
	{ "/system.slice/docker-" ID ".scope", 0, ID },
	/* docker with the cgroupfs driver */
	{ "/docker/" ID, 0, ID },
	{ "/docker/" ID "/", 0, ID },
	/* Kubernetes with containerd, systemd and cgroupfs layouts */
	{ "/kubepods/besteffort/pod8d2ab6f4-7f0c-4c36-9f0e-1d2c3b4a5f6e/cri-containerd-" ID
	  ".scope",
	  0, ID },
	{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8d2ab6f4_7f0c_4c36_9f0e_1d2c3b4a5f6e.slice/cri-containerd-" ID
	  ".scope",
	  0, ID },
	{ "/kubepods/burstable/pod8d2ab6f4-7f0c-4c36-9f0e-1d2c3b4a5f6e/" ID, 0, ID },
	/* cri-o and podman */
	{ "/kubepods.slice/crio-" ID ".scope", 0, ID },
	{ "/machine.slice/libpod-" ID ".scope", 0, ID },
	/* A process in a sub-cgroup of the container's scope. */
	{ "/system.slice/docker-" ID ".scope/init", 0, ID },
	/* Docker in docker: the innermost container. */
	{ "/docker/" ID2 "/docker/" ID, 0, ID },
	/* Upper-case hex digits are still hex digits. */
	{ "/docker/3F4E1C9A0B2D8E7F6A5B4C3D2E1F0A9B8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F", 0,
	  "3F4E1C9A0B2D8E7F6A5B4C3D2E1F0A9B8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F" },
	/* Not containers. */
	{ "/", -ENOENT, NULL },
	{ "", -ENOENT, NULL },
	{ "/user.slice", -ENOENT, NULL },
	{ "/user.slice/user-1000.slice/session-3.scope", -ENOENT, NULL },
	{ "/system.slice/ssh.service", -ENOENT, NULL },
	{ "/process_api/64665053c3b9471b0e3253ac7ab4fc95", -ENOENT, NULL }, /* 32 digits */
	/* Wrong lengths: 63 and 65 digits. */
	{ "/docker/"
	  "3f4e1c9a0b2d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3",
	  -ENOENT, NULL },
	{ "/docker/" ID "0", -ENOENT, NULL },
	{ "/system.slice/docker-" ID "a.scope", -ENOENT, NULL },
	{ "/system.slice/docker-"
	  "3f4e1c9a0b2d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3.scope",
	  -ENOENT, NULL },
	/* 128 digits: two ids' worth, but no id. */
	{ "/docker/" ID ID, -ENOENT, NULL },
	/* Not bounded by the separators. */
	{ "/dockerx" ID, -ENOENT, NULL },
	{ "/docker/" ID "x", -ENOENT, NULL },
	{ ID, -ENOENT, NULL },
	/* A non-hex digit inside. */
	{ "/docker/3f4e1c9a0b2d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4g3f", -ENOENT,
	  NULL },
};

static void test_id_from_cgroup(void)
{
	for (size_t i = 0; i < sizeof(cgroup_cases) / sizeof(cgroup_cases[0]); i++) {
		char id[65 + 8];
		int err, before = check_failures;

		memset(id, 'Z', sizeof(id));
		err = fp_container_id_from_cgroup(cgroup_cases[i].path, id);
		CHECK_EQ_INT(err, cgroup_cases[i].err);
		if (err == 0 && cgroup_cases[i].id) {
			CHECK_EQ_INT(strlen(id), 64);
			CHECK(!strcmp(id, cgroup_cases[i].id));
		}
		/* Never more than 65 bytes written. */
		for (size_t j = 65; j < sizeof(id); j++)
			CHECK(id[j] == 'Z');
		if (check_failures != before)
			fprintf(stderr, "  case %zu: %s\n", i, cgroup_cases[i].path);
	}
}

/* self_cgroup_id: a 64-hex-digit run in /proc/self/cgroup, found the
 * simple way; 0 if there is one. */
static int self_cgroup_id(char *id)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		size_t run = 0;
		for (char *p = line; *p; p++) {
			run = isxdigit((unsigned char)*p) ? run + 1 : 0;
			if (run == 64 && !isxdigit((unsigned char)p[1])) {
				memcpy(id, p - 63, 64);
				id[64] = '\0';
				found = 0;
			}
		}
	}
	fclose(f);
	return found;
}

static void test_name_self(void)
{
	char buf[128], id[65];

	memset(buf, 'Z', sizeof(buf));
	fp_container_name("/proc", "/nonexistent-docker-root", (uint32_t)getpid(), buf,
			  sizeof(buf));
	if (self_cgroup_id(id) != 0) {
		/* Not in a container (the usual case for these tests). */
		CHECK(!strcmp(buf, ""));
	} else {
		/* Running inside one: no docker state here, so its short id. */
		fprintf(stderr, "  running in container %.12s\n", id);
		CHECK_EQ_INT(strlen(buf), 12);
		CHECK(!strncmp(buf, id, 12));
	}
	/* A pid that does not exist, a procfs that does not exist. */
	memset(buf, 'Z', sizeof(buf));
	fp_container_name("/proc", "/var/lib/docker", 0x7ffffff0u, buf, sizeof(buf));
	CHECK(!strcmp(buf, ""));
	memset(buf, 'Z', sizeof(buf));
	fp_container_name("/nonexistent-proc", "/var/lib/docker", (uint32_t)getpid(), buf,
			  sizeof(buf));
	CHECK(!strcmp(buf, ""));
}

static char tmp[64];

static int write_file(const char *rel, const char *data)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(data, f);
	return fclose(f);
}

static void mkdirs(const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (char *p = path + strlen(tmp) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

static const char realistic_config[] =
	"{\"StreamConfig\":{},\"State\":{\"Running\":true,\"Paused\":false,\"Pid\":4242},"
	"\"ID\":\"" ID "\",\"Created\":\"2024-05-01T10:00:00Z\",\"Managed\":false,"
	"\"Path\":\"/usr/local/bin/supervisord\",\"Args\":[],"
	"\"Config\":{\"Hostname\":\"sonic\",\"Domainname\":\"\",\"User\":\"\","
	"\"Env\":[\"PATH=/usr/bin\"],\"Labels\":{\"com.azure.sonic.manifest\":"
	"\"{\\\"Name\\\":\\\"/not-this\\\"}\"}},"
	"\"Image\":\"sha256:abcd\",\"NetworkSettings\":{\"Networks\":{}},"
	"\"LogPath\":\"\",\"Name\":\"/swss\",\"Driver\":\"overlay2\","
	"\"MountPoints\":{\"/etc/sonic\":{\"Name\":\"\",\"Destination\":\"/etc/sonic\"}}}";

static const struct {
	const char *what;
	const char *cgroup; /* contents of proc/4242/cgroup; NULL: no file */
	const char *config; /* contents of config.v2.json for ID; NULL: no file */
	size_t buflen;
	const char *want;
} name_cases[] = {
	{ "docker name", "0::/system.slice/docker-" ID ".scope\n", "{\"Name\":\"/swss\"}", 128,
	  "swss" },
	{ "realistic config.v2.json", "0::/system.slice/docker-" ID ".scope\n", realistic_config,
	  128, "swss" },
	{ "no config: short id", "0::/system.slice/docker-" ID ".scope\n", NULL, 128,
	  "3f4e1c9a0b2d" },
	{ "config without a name", "0::/docker/" ID "\n", "{\"ID\":\"" ID "\"}", 128,
	  "3f4e1c9a0b2d" },
	{ "empty name", "0::/docker/" ID "\n", "{\"Name\":\"/\"}", 128, "3f4e1c9a0b2d" },
	{ "unterminated name", "0::/docker/" ID "\n", "{\"Name\":\"/swss", 128, "3f4e1c9a0b2d" },
	{ "cgroup v1, id on a later line",
	  "12:pids:/\n11:cpuset:/\n4:memory:/docker/" ID "\n1:name=systemd:/docker/" ID "\n",
	  "{\"Name\":\"/syncd\"}", 128, "syncd" },
	{ "last line without newline", "0::/docker/" ID, "{\"Name\":\"/bgp\"}", 128, "bgp" },
	{ "not in a container", "0::/user.slice/user-0.slice/session-1.scope\n",
	  "{\"Name\":\"/swss\"}", 128, "" },
	{ "empty cgroup file", "", "{\"Name\":\"/swss\"}", 128, "" },
	{ "no cgroup file", NULL, "{\"Name\":\"/swss\"}", 128, "" },
	{ "garbage lines", "garbage\nno colons here\n", NULL, 128, "" },
	/* Small buffers are never overrun. */
	{ "name fits exactly", "0::/docker/" ID "\n", "{\"Name\":\"/swss\"}", 5, "swss" },
	{ "name too long for buf", "0::/docker/" ID "\n", "{\"Name\":\"/swss\"}", 4, "3f4" },
	{ "short id too long for buf", "0::/docker/" ID "\n", NULL, 8, "3f4e1c9" },
};

static void test_name_fake_roots(void)
{
	char proc[80], docker[80], json[160];

	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	snprintf(docker, sizeof(docker), "%s/docker", tmp);
	snprintf(json, sizeof(json), "docker/containers/%s/config.v2.json", ID);
	mkdirs("proc/4242");
	mkdirs("docker/containers/" ID);
	for (size_t i = 0; i < sizeof(name_cases) / sizeof(name_cases[0]); i++) {
		char buf[128 + 16];
		char path[256];
		int before = check_failures;

		snprintf(path, sizeof(path), "%s/proc/4242/cgroup", tmp);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", tmp, json);
		unlink(path);
		if (name_cases[i].cgroup)
			CHECK_EQ_INT(write_file("proc/4242/cgroup", name_cases[i].cgroup), 0);
		if (name_cases[i].config)
			CHECK_EQ_INT(write_file(json, name_cases[i].config), 0);
		memset(buf, 'Z', sizeof(buf));
		fp_container_name(proc, docker, 4242, buf, name_cases[i].buflen);
		CHECK(!strcmp(buf, name_cases[i].want));
		for (size_t j = name_cases[i].buflen; j < sizeof(buf); j++)
			if (buf[j] != 'Z') {
				CHECK(!"wrote past the buffer");
				break;
			}
		/* Another pid under the same root has no cgroup file. */
		memset(buf, 'Z', sizeof(buf));
		fp_container_name(proc, docker, 4243, buf, 128);
		CHECK(!strcmp(buf, ""));
		if (check_failures != before)
			fprintf(stderr, "  case %zu: %s: got \"%.*s\"\n", i, name_cases[i].what,
				(int)strnlen(buf, 128), buf);
	}
	/* A missing docker root: the short id. */
	char buf[128];
	CHECK_EQ_INT(write_file("proc/4242/cgroup", "0::/docker/" ID "\n"), 0);
	CHECK_EQ_INT(write_file(json, "{\"Name\":\"/swss\"}"), 0);
	fp_container_name(proc, "/nonexistent-docker-root", 4242, buf, sizeof(buf));
	CHECK(!strcmp(buf, "3f4e1c9a0b2d"));
	fp_container_name(proc, docker, 4242, buf, sizeof(buf));
	CHECK(!strcmp(buf, "swss"));
}

/* Docker writes "Name" after "State" and "Config", which health-check
 * logs, image labels and environments can make large: the name must still
 * be found, wherever the reads end. */
static void test_name_large_config(void)
{
	static const size_t fillers[] = { 0, 8000, 8150, 8192, 16300, 16330, 16383, 65536, 300000 };
	char proc[80], docker[80], json[160], *config, buf[128];

	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	snprintf(docker, sizeof(docker), "%s/docker", tmp);
	snprintf(json, sizeof(json), "docker/containers/%s/config.v2.json", ID);
	CHECK_EQ_INT(write_file("proc/4242/cgroup", "0::/system.slice/docker-" ID ".scope\n"), 0);
	for (size_t i = 0; i < sizeof(fillers) / sizeof(fillers[0]); i++) {
		size_t at;

		config = malloc(fillers[i] + 256);
		if (!config)
			return;
		at = (size_t)sprintf(config, "{\"ID\":\"%s\",\"Config\":{\"Env\":[\"BIG=", ID);
		memset(config + at, 'x', fillers[i]);
		at += fillers[i];
		sprintf(config + at, "\"]},\"Name\":\"/syncd\",\"Driver\":\"overlay2\"}");
		CHECK_EQ_INT(write_file(json, config), 0);
		memset(buf, 'Z', sizeof(buf));
		fp_container_name(proc, docker, 4242, buf, sizeof(buf));
		if (strcmp(buf, "syncd") != 0) {
			fprintf(stderr, "  filler %zu: got \"%.*s\"\n", fillers[i],
				(int)strnlen(buf, sizeof(buf)), buf);
			CHECK(!"name not found");
		}
		free(config);
	}
}

int main(void)
{
	int rc;

	/* Short: fp_container_name builds paths in small buffers. */
	if (check_tmpdir(tmp, sizeof(tmp), "fpct"))
		return 1;
	RUN(test_id_from_cgroup);
	RUN(test_name_self);
	RUN(test_name_fake_roots);
	RUN(test_name_large_config);
	rc = CHECK_DONE();
	if (check_rmtree(tmp))
		rc = 1;
	return rc;
}
