/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_kmod.c - the kmod backend against the real execpack module.
 *
 * Runs where /dev/execpack exists (make check-kmod boots a kernel under
 * qemu with the module loaded); anywhere else it exits 77 (SKIP) with the
 * reason.  EXECPACK_DEVICE names another device node.
 *
 * The files: kmod-suite.h, the raw device's calls and a pool on it;
 * kmod-api.c, through the public API; kmod-device.c, the device one call
 * at a time; kmod-races.c, the device under racing calls and faulting
 * arguments; here, what nothing may leave behind (a charge, the kernel's
 * complaints) and main().
 */
#include "config.h"

#include "kmod-suite.h"

const char *dev_path;
size_t page;

/* ---- last: what nothing may leave behind ---------------------------------- */

/*
 * Every test ran in its own process (or closed what it opened), so nothing
 * may stay charged.  Only meaningful where no one else uses the device:
 * EXECPACK_KMOD_ALONE=1 (set in the check-kmod guest).
 */
START_TEST(test_nothing_left_charged)
{
	const char *alone = getenv("EXECPACK_KMOD_ALONE");

	if (!alone || strcmp(alone, "1")) {
		fprintf(stderr, "EXECPACK_KMOD_ALONE not set: charge not checked\n");
		return;
	}
	int fd = dev_open();

	ck_assert_uint_eq(info(fd).user_used, 0);
	close(fd);
}
END_TEST

/* Last: nothing above made the kernel complain. */
START_TEST(test_kernel_log_clean)
{
	int n = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);

	if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
		fprintf(stderr, "kernel log not readable here: %s\n", strerror(errno));
		return;
	}
	ck_assert_int_gt(n, 0);

	char *buf = malloc((size_t)n + 1);

	ck_assert_ptr_nonnull(buf);
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, n);
	ck_assert_int_ge(n, 0);
	buf[n] = 0;

	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection", "Call Trace", "refcount_t",
		"list_add corruption", "list_del corruption", "bad page",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *hit = strstr(buf, bad[i]);

		if (hit) {
			char *eol = strchr(hit, '\n');

			if (eol)
				*eol = 0;
			ck_abort_msg("kernel log: %s", hit);
		}
	}
	free(buf);
}
END_TEST

static Suite *kmod_suite(void)
{
	Suite *s = suite_create("kmod");
	TCase *api = tcase_create("api");
	TCase *dev = tcase_create("device");
	TCase *klog = tcase_create("klog");

	/* generous: under qemu without KVM everything is slow */
	tcase_set_timeout(api, 120);
	tcase_set_timeout(dev, 120);
	kmod_add_api_tests(api);
	kmod_add_device_tests(dev);
	kmod_add_race_tests(dev);
	tcase_add_test(klog, test_nothing_left_charged);
	tcase_add_test(klog, test_kernel_log_clean);
	suite_add_tcase(s, api);
	suite_add_tcase(s, dev);
	suite_add_tcase(s, klog);
	return s;
}

/*
 * EXECPACK_KMOD_DENIED: run as a user outside the device's group (the
 * module makes it 0660 root:root; packaging's udev rule gives it to the
 * execpack group): open() is refused, and so are the kmod backend's probe
 * and pool, with -EACCES and a reason, never a crash or another backend.
 */
static int check_denied(void)
{
	struct ep_config cfg = { .sz = sizeof(cfg), .backend = EP_BACKEND_KMOD, .path = dev_path };
	struct ep_pool *pool = NULL;
	char why[256] = "";
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);
	int e = errno;

	if (fd >= 0) {
		close(fd);
		printf("FAIL: denied: uid %u opened %s\n", (unsigned)getuid(), dev_path);
		return EXIT_FAILURE;
	}
	if (e != EACCES) {
		printf("FAIL: denied: open %s: %s, not EACCES\n", dev_path, strerror(e));
		return EXIT_FAILURE;
	}
	int rc = ep_backend_probe(EP_BACKEND_KMOD, &cfg, why, sizeof(why));

	if (rc != -EACCES || !why[0]) {
		printf("FAIL: denied: ep_backend_probe(kmod) = %d (%s), not -EACCES with a reason\n",
		       rc, why);
		return EXIT_FAILURE;
	}
	rc = ep_pool_create(&cfg, &pool);
	if (rc != -EACCES) {
		printf("FAIL: denied: ep_pool_create(kmod) = %d, not -EACCES\n", rc);
		if (rc == 0)
			ep_pool_destroy(pool);
		return EXIT_FAILURE;
	}
	printf("PASS: denied: uid %u: %s\n", (unsigned)getuid(), why);
	return EXIT_SUCCESS;
}

int main(void)
{
	dev_path = getenv("EXECPACK_DEVICE");
	if (!dev_path || !*dev_path)
		dev_path = EXECPACK_DEVICE;
	page = (size_t)sysconf(_SC_PAGESIZE);

	/* EXECPACK_KMOD_UID: run as that (unprivileged) user; the guest does both. */
	const char *uid = getenv("EXECPACK_KMOD_UID");

	if (uid && *uid) {
		unsigned long id = strtoul(uid, NULL, 10);

		if (setgroups(0, NULL) || setresgid((gid_t)id, (gid_t)id, (gid_t)id) ||
		    setresuid((uid_t)id, (uid_t)id, (uid_t)id)) {
			printf("cannot become uid %lu: %s\n", id, strerror(errno));
			return EXIT_FAILURE;
		}
	}

	const char *denied = getenv("EXECPACK_KMOD_DENIED");

	if (denied && *denied == '1')
		return check_denied();

	int fd = open(dev_path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		printf("SKIP: kmod: %s: %s%s\n", dev_path, strerror(e),
		       e == ENOENT || e == ENODEV || e == ENXIO ? " (module not loaded?)" : "");
		return 77;
	}
	close(fd);

	SRunner *sr = srunner_create(kmod_suite());

	srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every test */
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
