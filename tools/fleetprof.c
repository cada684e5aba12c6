/* fleetprof.c: the user's command-line tool. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "record", fp_cmd_record, "profile this machine and write a flame graph" },
	{ "report", fp_cmd_report, "a profile file as a table of functions or a call tree" },
	{ "symbolize", fp_cmd_symbolize, "addresses to function, file:line and inline frames" },
	{ "upload", fp_cmd_upload, "upload binaries and debug files to a symbol service" },
	{ "loadgen", fp_cmd_loadgen, "simulate many devices against a symbolizer" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: fleetprof COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\noptions:\n"
		   "  -h, --help     this help\n"
		   "  -V, --version  print the version\n"
		   "\n'fleetprof COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("fleetprof %s\n", FP_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "fleetprof: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
