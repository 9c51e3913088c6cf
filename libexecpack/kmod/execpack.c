// SPDX-License-Identifier: GPL-2.0
/*
 * execpack.c - executable memory for JIT code with no writable user view.
 *
 * /dev/execpack hands out "packs": page arrays that user space may map
 * PROT_READ|PROT_EXEC but never PROT_WRITE.  Code reaches a pack only
 * through ioctls that copy into the module's own kernel mapping, so a
 * process using it never holds a writable mapping of its code (strict
 * W^X, as the kernel's bpf_prog_pack does for BPF programs).
 *
 * Each open() is a context that owns its packs; closing the last
 * reference to the file frees them.  Pack memory is charged to the
 * opener's effective uid against the user_limit module parameter, in the
 * spirit of bpf_jit_limit.
 *
 * Locking: ctx->lock guards the id table; pack->lock serialises writes
 * into one pack.  An id is reserved (NULL) until create has copied it out,
 * so only a caller that was told the id can find the pack.  mmap() runs
 * under mmap_lock and takes ctx->lock, while user accesses may fault
 * (taking mmap_lock), so ctx->lock is never held across a user access;
 * the copy ioctl reads or pins its source before it takes pack->lock.
 */

#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uidgid.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <asm/cacheflush.h>

#include "execpack_uapi.h"

/* One create may not ask for more; the per-user limit usually bites first. */
#define EP_MAX_PACK (1UL << 30)
/* Keep every cookie (pgoff << PAGE_SHIFT) a positive loff_t. */
#define EP_PGOFF_MAX (1UL << (62 - PAGE_SHIFT))

static unsigned long user_limit = 64UL << 20;
module_param(user_limit, ulong, 0644);
MODULE_PARM_DESC(user_limit, "bytes of packs one user may hold (0: no limit)");

struct ep_user {
	struct list_head node;
	kuid_t uid;
	unsigned int refs;	/* contexts and charged packs */
	unsigned long used;	/* charged bytes */
};

/* Guards ep_users and every ep_user's fields. */
static DEFINE_MUTEX(ep_users_lock);
static LIST_HEAD(ep_users);

struct ep_ctx {
	struct mutex lock;	/* ids, next_pgoff */
	struct idr ids;		/* pack id -> live (not destroyed) pack */
	struct ep_user *user;
	unsigned long next_pgoff;
};

struct ep_pack {
	struct kref ref;	/* the id table's, plus one per vma */
	struct mutex lock;	/* serialises writes into the pack */
	struct ep_user *user;	/* charged, or NULL */
	unsigned long pgoff;	/* mmap offset, in pages */
	unsigned long npages;
	struct page **pages;
	u8 *kaddr;		/* kernel view for copies; never executable */
	u32 pattern_len;
	u8 *pattern;
};

static struct ep_user *ep_user_get(kuid_t uid)
{
	struct ep_user *u;

	mutex_lock(&ep_users_lock);
	list_for_each_entry(u, &ep_users, node) {
		if (uid_eq(u->uid, uid)) {
			u->refs++;
			goto out;
		}
	}
	u = kzalloc(sizeof(*u), GFP_KERNEL);
	if (u) {
		u->uid = uid;
		u->refs = 1;
		list_add(&u->node, &ep_users);
	}
out:
	mutex_unlock(&ep_users_lock);
	return u;
}

static void ep_user_put_locked(struct ep_user *u)
{
	if (--u->refs)
		return;
	WARN_ON(u->used);
	list_del(&u->node);
	kfree(u);
}

static void ep_user_put(struct ep_user *u)
{
	mutex_lock(&ep_users_lock);
	ep_user_put_locked(u);
	mutex_unlock(&ep_users_lock);
}

/* Charges bytes to u (taking a reference for the pack), or -EPERM. */
static int ep_user_charge(struct ep_user *u, unsigned long bytes)
{
	unsigned long limit = READ_ONCE(user_limit);
	int ret = 0;

	mutex_lock(&ep_users_lock);
	if (limit && (bytes > limit || u->used > limit - bytes)) {
		ret = -EPERM;
	} else {
		u->used += bytes;
		u->refs++;
	}
	mutex_unlock(&ep_users_lock);
	return ret;
}

static void ep_user_uncharge(struct ep_user *u, unsigned long bytes)
{
	mutex_lock(&ep_users_lock);
	u->used -= bytes;
	ep_user_put_locked(u);
	mutex_unlock(&ep_users_lock);
}

static void ep_pack_free(struct ep_pack *p)
{
	unsigned long i;

	if (p->kaddr)
		vunmap(p->kaddr);
	if (p->pages) {
		/* Pages still in a page table keep their own reference. */
		for (i = 0; i < p->npages; i++)
			if (p->pages[i])
				put_page(p->pages[i]);
		kvfree(p->pages);
	}
	if (p->user)
		ep_user_uncharge(p->user, p->npages << PAGE_SHIFT);
	kfree(p->pattern);
	kfree(p);
}

static void ep_pack_release(struct kref *ref)
{
	ep_pack_free(container_of(ref, struct ep_pack, ref));
}

static void ep_pack_put(struct ep_pack *p)
{
	kref_put(&p->ref, ep_pack_release);
}

static struct ep_pack *ep_pack_lookup(struct ep_ctx *ctx, u32 id)
{
	struct ep_pack *p;

	mutex_lock(&ctx->lock);
	p = idr_find(&ctx->ids, id);
	if (p)
		kref_get(&p->ref);
	mutex_unlock(&ctx->lock);
	return p;
}

/* Pattern phase starts at off: byte off+i = pattern[i % pattern_len]. */
static void ep_fill(struct ep_pack *p, unsigned long off, unsigned long len)
{
	u8 *dst = p->kaddr + off;
	unsigned long n, k;

	if (p->pattern_len == 1) {
		memset(dst, p->pattern[0], len);
		return;
	}
	/* One period, then keep doubling it: n stays a multiple of the period. */
	n = min_t(unsigned long, len, p->pattern_len);
	memcpy(dst, p->pattern, n);
	while (n < len) {
		k = min(n, len - n);
		memcpy(dst + n, dst, k);
		n += k;
	}
}

/*
 * A store of up to 8 bytes inside one aligned 8-byte word becomes a single
 * 8-byte store, so code running concurrently never sees it half done.  The
 * bytes were read into buf first: a source that could not be read never
 * gets here.  Under pack->lock.
 */
static void ep_store_word(u8 *dst, const u8 *buf, size_t len)
{
	unsigned long a = (unsigned long)dst & 7;
	u64 *w = (u64 *)(dst - a);
	u64 v;

	v = READ_ONCE(*w);
	memcpy((u8 *)&v + a, buf, len);
	WRITE_ONCE(*w, v);
}

/*
 * Longer copies are all or nothing: every page of the source is pinned
 * before the first byte of the pack changes, so a source that cannot be
 * read (NULL, a kernel address, a hole, a mapping get_user_pages() refuses
 * such as VM_IO or VM_PFNMAP) fails with the pack as it was, and once
 * pinned, a source that another thread unmaps is still read whole.
 * copy_from_user() straight into the pack left the bytes it could not read
 * as zeros and those before the fault as new code; reading the whole source
 * into a bounce buffer first would cost a kernel copy of up to a pack's
 * size.  Here the extra memory is one pointer per source page, on the stack
 * for short copies.  The source is pinned before pack->lock is taken, so
 * faulting it in does not hold up other writers of the pack.
 */
#define EP_PIN_ON_STACK 8

static int ep_copy_pinned(struct ep_pack *p, unsigned long off,
			  const void __user *src, size_t len)
{
	struct page *on_stack[EP_PIN_ON_STACK], **pages = on_stack;
	unsigned long start = (unsigned long)src, first, n, got = 0, i;
	size_t done = 0, in, k;
	void *from;
	int ret = 0, r;

	/* Also keeps start + len from wrapping. */
	if (!access_ok(src, len))
		return -EFAULT;
	first = start >> PAGE_SHIFT;
	n = ((start + len - 1) >> PAGE_SHIFT) - first + 1;
	if (n > EP_PIN_ON_STACK) {
		pages = kvmalloc_array(n, sizeof(*pages), GFP_KERNEL_ACCOUNT);
		if (!pages)
			return -ENOMEM;
	}
	while (got < n) {
		r = pin_user_pages_fast((first + got) << PAGE_SHIFT,
					min_t(unsigned long, n - got, INT_MAX), 0,
					pages + got);
		if (r <= 0) {
			ret = r == -ENOMEM ? -ENOMEM : -EFAULT;
			goto out;
		}
		got += r;
	}

	mutex_lock(&p->lock);
	in = offset_in_page(start);
	for (i = 0; i < n; i++) {
		k = min_t(size_t, PAGE_SIZE - in, len - done);
		from = kmap_local_page(pages[i]);
		memcpy(p->kaddr + off + done, from + in, k);
		kunmap_local(from);
		done += k;
		in = 0;
		cond_resched();
	}
	flush_icache_range((unsigned long)p->kaddr + off,
			   (unsigned long)p->kaddr + off + len);
	mutex_unlock(&p->lock);
out:
	unpin_user_pages(pages, got);
	if (pages != on_stack)
		kvfree(pages);
	return ret;
}

/*
 * Reads an argument struct whose leading __u32 is the caller's sizeof:
 * shorter than min is malformed; extra bytes must be zero (E2BIG), and
 * there are at most a page of them, as openat2() and clone3() take theirs
 * (a larger size is E2BIG at once, not a scan of up to 4 GiB of user memory
 * without a rescheduling point).
 *
 * The size is read once.  The copy below reads the size field again, and
 * another thread may have changed it in between: what the copy holds is
 * replaced by the size that was checked, so that the call and ep_put_arg()
 * agree on it (a create that validated one size and copied back as many
 * bytes as the other said, none, returned 0 without its id).
 */
static int ep_get_arg(void *karg, size_t ksize, size_t min,
		      const void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (const u32 __user *)uarg))
		return -EFAULT;
	if (usize > PAGE_SIZE)
		return -E2BIG;
	if (usize < min)
		return -EINVAL;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	*(u32 *)karg = usize;
	return 0;
}

/* Copies back no more than the caller's struct holds. */
static int ep_put_arg(void __user *uarg, const void *karg, size_t ksize)
{
	u32 usize = *(const u32 *)karg;

	return copy_to_user(uarg, karg, min_t(size_t, usize, ksize)) ?
	       -EFAULT : 0;
}

static long ep_ioc_info(struct ep_ctx *ctx, void __user *uarg)
{
	struct execpack_info a;
	int ret;

	ret = ep_get_arg(&a, sizeof(a), sizeof(a.size), uarg);
	if (ret)
		return ret;
	a.abi_version = EXECPACK_ABI_VERSION;
	a.page_size = PAGE_SIZE;
	a.max_pack = EP_MAX_PACK;
	a.user_limit = READ_ONCE(user_limit);
	mutex_lock(&ep_users_lock);
	a.user_used = ctx->user->used;
	mutex_unlock(&ep_users_lock);
	return ep_put_arg(uarg, &a, sizeof(a));
}

static long ep_ioc_create(struct ep_ctx *ctx, void __user *uarg)
{
	struct execpack_create a;
	struct ep_pack *p;
	unsigned long i;
	int ret, id;

	ret = ep_get_arg(&a, sizeof(a), sizeof(a), uarg);
	if (ret)
		return ret;
	if (a.flags || !a.len || a.len > EP_MAX_PACK || !PAGE_ALIGNED(a.len))
		return -EINVAL;
	if ((a.pattern_len < 1 || a.pattern_len > EXECPACK_PATTERN_MAX) &&
	    a.pattern_len != PAGE_SIZE)
		return -EINVAL;

	p = kzalloc(sizeof(*p), GFP_KERNEL_ACCOUNT);
	if (!p)
		return -ENOMEM;
	kref_init(&p->ref);
	mutex_init(&p->lock);
	p->npages = a.len >> PAGE_SHIFT;
	p->pattern_len = a.pattern_len;
	p->pattern = kmalloc(a.pattern_len, GFP_KERNEL_ACCOUNT);
	if (!p->pattern) {
		ret = -ENOMEM;
		goto err;
	}
	if (copy_from_user(p->pattern, u64_to_user_ptr(a.pattern),
			   a.pattern_len)) {
		ret = -EFAULT;
		goto err;
	}
	ret = ep_user_charge(ctx->user, a.len);
	if (ret)
		goto err;
	p->user = ctx->user;

	p->pages = kvcalloc(p->npages, sizeof(*p->pages), GFP_KERNEL_ACCOUNT);
	if (!p->pages) {
		ret = -ENOMEM;
		goto err;
	}
	for (i = 0; i < p->npages; i++) {
		p->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT);
		if (!p->pages[i]) {
			ret = -ENOMEM;
			goto err;
		}
	}
	p->kaddr = vmap(p->pages, p->npages, VM_MAP, PAGE_KERNEL);
	if (!p->kaddr) {
		ret = -ENOMEM;
		goto err;
	}
	/* Traps everywhere before the pack is findable, hence mappable. */
	ep_fill(p, 0, a.len);

	mutex_lock(&ctx->lock);
	if (ctx->next_pgoff > EP_PGOFF_MAX - p->npages) {
		mutex_unlock(&ctx->lock);
		ret = -ENOSPC;
		goto err;
	}
	/*
	 * Reserve the id (a NULL entry) but publish the pack only once the
	 * caller holds the result: ids are guessable, so a pack findable before
	 * the copy-out could be destroyed by another thread while this one,
	 * failing the copy, still owns the reference.
	 */
	id = idr_alloc(&ctx->ids, NULL, 1, INT_MAX, GFP_KERNEL);
	if (id < 0) {
		mutex_unlock(&ctx->lock);
		ret = id;
		goto err;
	}
	p->pgoff = ctx->next_pgoff;
	ctx->next_pgoff += p->npages;
	mutex_unlock(&ctx->lock);

	a.id = id;
	a.cookie = (u64)p->pgoff << PAGE_SHIFT;
	ret = ep_put_arg(uarg, &a, sizeof(a));
	mutex_lock(&ctx->lock);
	if (ret)
		idr_remove(&ctx->ids, id);
	else
		/* Only create fills or removes a reserved slot: it is still NULL. */
		WARN_ON(idr_replace(&ctx->ids, p, id) != NULL);
	mutex_unlock(&ctx->lock);
	if (ret)
		ep_pack_put(p);	/* never published: the only reference */
	return ret;
err:
	ep_pack_free(p);
	return ret;
}

/* Overflow-safe: [off, off+len) lies inside the pack. */
static bool ep_range_ok(const struct ep_pack *p, u64 off, u64 len)
{
	u64 size = (u64)p->npages << PAGE_SHIFT;

	return len <= size && off <= size - len;
}

static long ep_ioc_copy(struct ep_ctx *ctx, void __user *uarg)
{
	struct execpack_copy a;
	struct ep_pack *p;
	u8 word[8];
	int ret;

	ret = ep_get_arg(&a, sizeof(a), sizeof(a), uarg);
	if (ret)
		return ret;
	p = ep_pack_lookup(ctx, a.id);
	if (!p)
		return -ENOENT;
	if (!ep_range_ok(p, a.off, a.len)) {
		ret = -ERANGE;
		goto out;
	}
	if (!a.len)
		goto out;
	/*
	 * A failed copy changes nothing: the source is read (or pinned) whole
	 * before the pack is written, and never under pack->lock.
	 */
	if (a.len <= 8 && (a.off & 7) + a.len <= 8) {
		if (copy_from_user(word, u64_to_user_ptr(a.src), a.len)) {
			ret = -EFAULT;
			goto out;
		}
		mutex_lock(&p->lock);
		ep_store_word(p->kaddr + a.off, word, a.len);
		flush_icache_range((unsigned long)p->kaddr + a.off,
				   (unsigned long)p->kaddr + a.off + a.len);
		mutex_unlock(&p->lock);
	} else {
		ret = ep_copy_pinned(p, a.off, u64_to_user_ptr(a.src), a.len);
	}
out:
	ep_pack_put(p);
	return ret;
}

static long ep_ioc_fill(struct ep_ctx *ctx, void __user *uarg)
{
	struct execpack_fill a;
	struct ep_pack *p;
	int ret;

	ret = ep_get_arg(&a, sizeof(a), sizeof(a), uarg);
	if (ret)
		return ret;
	p = ep_pack_lookup(ctx, a.id);
	if (!p)
		return -ENOENT;
	if (!ep_range_ok(p, a.off, a.len)) {
		ret = -ERANGE;
		goto out;
	}
	if (!a.len)
		goto out;
	mutex_lock(&p->lock);
	ep_fill(p, a.off, a.len);
	flush_icache_range((unsigned long)p->kaddr + a.off,
			   (unsigned long)p->kaddr + a.off + a.len);
	mutex_unlock(&p->lock);
out:
	ep_pack_put(p);
	return ret;
}

static long ep_ioc_destroy(struct ep_ctx *ctx, void __user *uarg)
{
	struct execpack_destroy a;
	struct ep_pack *p;
	int ret;

	ret = ep_get_arg(&a, sizeof(a), sizeof(a), uarg);
	if (ret)
		return ret;
	mutex_lock(&ctx->lock);
	/* A reserved id (its create still copying out) is no pack yet. */
	p = a.id > INT_MAX ? NULL : idr_find(&ctx->ids, a.id);
	if (p)
		idr_remove(&ctx->ids, a.id);
	mutex_unlock(&ctx->lock);
	if (!p)
		return -ENOENT;
	/* Mappings keep the pages (and the charge) until they go away. */
	ep_pack_put(p);
	return 0;
}

static long ep_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct ep_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;

	/* Type and number only: the size in cmd changes when a struct grows. */
	if (_IOC_TYPE(cmd) != EXECPACK_IOC_MAGIC)
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(EXECPACK_IOC_INFO):
		return ep_ioc_info(ctx, uarg);
	case _IOC_NR(EXECPACK_IOC_CREATE):
		return ep_ioc_create(ctx, uarg);
	case _IOC_NR(EXECPACK_IOC_COPY):
		return ep_ioc_copy(ctx, uarg);
	case _IOC_NR(EXECPACK_IOC_FILL):
		return ep_ioc_fill(ctx, uarg);
	case _IOC_NR(EXECPACK_IOC_DESTROY):
		return ep_ioc_destroy(ctx, uarg);
	}
	return -ENOTTY;
}

static void ep_vm_open(struct vm_area_struct *vma)
{
	struct ep_pack *p = vma->vm_private_data;

	kref_get(&p->ref);
}

static void ep_vm_close(struct vm_area_struct *vma)
{
	ep_pack_put(vma->vm_private_data);
}

/* Only after the ptes were zapped (madvise): the pages are all inserted. */
static vm_fault_t ep_vm_fault(struct vm_fault *vmf)
{
	struct ep_pack *p = vmf->vma->vm_private_data;
	unsigned long idx = vmf->pgoff - p->pgoff;

	if (vmf->pgoff < p->pgoff || idx >= p->npages)
		return VM_FAULT_SIGBUS;
	vmf->page = p->pages[idx];
	get_page(vmf->page);
	return 0;
}

static const struct vm_operations_struct ep_vm_ops = {
	.open = ep_vm_open,
	.close = ep_vm_close,
	.fault = ep_vm_fault,
};

static int ep_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ep_ctx *ctx = file->private_data;
	unsigned long n = vma_pages(vma), first, i;
	struct ep_pack *p = NULL, *it;
	int id, ret;

	/* Never a writable view of code, not even a private COW copy. */
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;

	mutex_lock(&ctx->lock);
	idr_for_each_entry(&ctx->ids, it, id) {
		if (vma->vm_pgoff >= it->pgoff &&
		    vma->vm_pgoff - it->pgoff < it->npages) {
			p = it;
			kref_get(&p->ref);
			break;
		}
	}
	mutex_unlock(&ctx->lock);
	if (!p)
		return -EINVAL;
	first = vma->vm_pgoff - p->pgoff;
	if (n > p->npages - first) {
		ret = -EINVAL;
		goto err;
	}

	/* mprotect(PROT_WRITE) must fail later on, too. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_clear(vma, VM_MAYWRITE);
	vm_flags_set(vma, VM_DONTEXPAND);
#else
	vma->vm_flags &= ~VM_MAYWRITE;
	vma->vm_flags |= VM_DONTEXPAND;
#endif
	for (i = 0; i < n; i++) {
		ret = vm_insert_page(vma, vma->vm_start + (i << PAGE_SHIFT),
				     p->pages[first + i]);
		if (ret)
			goto err;
	}
	/* Set last: on failure the core may not call ->close. */
	vma->vm_private_data = p;
	vma->vm_ops = &ep_vm_ops;
	return 0;
err:
	ep_pack_put(p);
	return ret;
}

static int ep_open(struct inode *inode, struct file *file)
{
	struct ep_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	ctx->user = ep_user_get(current_euid());
	if (!ctx->user) {
		kfree(ctx);
		return -ENOMEM;
	}
	mutex_init(&ctx->lock);
	idr_init(&ctx->ids);
	file->private_data = ctx;
	return 0;
}

/* Every mapping holds the file, so no vma refers to these packs any more. */
static int ep_release(struct inode *inode, struct file *file)
{
	struct ep_ctx *ctx = file->private_data;
	struct ep_pack *p;
	int id;

	idr_for_each_entry(&ctx->ids, p, id)
		ep_pack_put(p);
	idr_destroy(&ctx->ids);
	ep_user_put(ctx->user);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return 0;
}

static const struct file_operations ep_fops = {
	.owner = THIS_MODULE,
	.open = ep_open,
	.release = ep_release,
	.unlocked_ioctl = ep_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = ep_mmap,
	.llseek = noop_llseek,
};

static struct miscdevice ep_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "execpack",
	.fops = &ep_fops,
	/*
	 * Root only until udev gives the device to a group (the Debian
	 * package's rule: group execpack, 0660), as /dev/kvm has kvm: who may
	 * pin kernel pages is the administrator's choice.  user_limit bounds
	 * what each of them can pin.
	 */
	.mode = 0660,
};

static int __init ep_init(void)
{
	return misc_register(&ep_misc);
}

static void __exit ep_exit(void)
{
	misc_deregister(&ep_misc);
	/* Open files pin the module: a user left now means a leaked pack. */
	WARN_ON(!list_empty(&ep_users));
}

module_init(ep_init);
module_exit(ep_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Executable packs for JIT code without writable user mappings");
