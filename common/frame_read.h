/* Reading frames (frame.h) off a socket bufferevent. */
#pragma once

#include <stddef.h>

struct bufferevent;

/* libevent 2.1 reads at most 4 KiB from a socket per loop turn, so a frame
 * carrying a 4 KiB page arrived in two turns, each with its epoll_wait and
 * timer re-arm. Called when bev's input holds the start of a frame of total
 * bytes, this reads what the socket has of the rest now, in one read(2) when
 * it is all there (no FIONREAD, no 4 KiB steps). It stops at EAGAIN, end of
 * file or an error, which the bufferevent sees on its next read. */
void frame_read_rest(struct bufferevent *bev, size_t total);
