ftvm-trace-text 1
# b.trace; ftvmctl trace binary makes the binary trace back from the lines
# that do not start with '#' (common/TRACE.md).
format 1
header protocol=1
header node=b
header partner_endpoint=127.0.0.1:35451
header page_size=512
header memory_size=16384
header store_size=131072
header heartbeat_ms=1000
header dead_after_ms=5000
header request_timeout_ms=2000
header solo=serve
header policy.stripe=2048
header channels=all
header ftvmd_version=0.1.0
header started_realtime=2026-11-22T19:32:35Z
header started_monotonic_us=62063770897
#     1    0.001429 partner out 127.0.0.1:53206  sender=b epoch=1 Hello node_id=b version=1 epoch=1 page_size=512 frame_count=32 state=STARTING
record 1429 partner out "127.0.0.1:53206"
  08011201621801520e0a01621001180120800428203801
#     2    0.001479 partner in  127.0.0.1:53206  sender=a epoch=1 Hello node_id=a version=1 epoch=1 page_size=512 frame_count=32 initiator=true state=STARTING
record 1479 partner in "127.0.0.1:53206"
  0801120161180152100a016110011801208004282030013801
#     3    0.001500 partner out a                sender=b epoch=1 Heartbeat sent_us=62063772395 state=ACTIVE
record 1500 partner out "a"
  080112016218015a0908eb85a89ae7011002
#     4    0.001593 partner in  a                sender=a epoch=1 Heartbeat sent_us=62063772442 state=ACTIVE
record 1593 partner in "a"
  080112016118015a09089a86a89ae7011002
#     5    0.064325 client  in  client 1 pid 20625 id=1 StatusRequest
record 64325 client in "client 1 pid 20625"
  08015200
#     6    0.064385 client  out client 1 pid 20625 id=1 StatusReply node=b state=active epoch=1 transport=tcp transport_reason="auto: no RDMA device (ibv_get_device_list found none), using tcp" partner={id=a link=up state=active endpoint=127.0.0.1:35451 link_changes=1 store_state=empty store_silent_ms=65} frames_total=32 frames_free=32 page_size=512 pid=20604 reason="partner a linked at epoch 1" pool_blocks=1 pool_blocks_in_use=1 pool_block_bytes=16384
record 64385 client out "client 1 pid 20625"
  080152b4010a01621206616374697665180122037463702a406175746f3a206e
  6f2052444d412064657669636520286962765f6765745f6465766963655f6c69
  737420666f756e64206e6f6e65292c207573696e6720746370322b0a01611202
  75701a06616374697665220f3132372e302e302e313a333534353128013a0565
  6d70747948413820402058800460fca0016a1b706172746e65722061206c696e
  6b65642061742065706f63682031f00101f801018002808001
#     7    0.089887 partner in  a                Batch of 2
#     7.1                                 sender=a epoch=1 seq=1 lsn=1 SpaceRequest bytes=24576
#     7.2                                 sender=a epoch=1 seq=2 lsn=1 AllocateMemory guid=a-1 size=24576 block_size=512 policy=default home=a store_offset=98304
record 89887 partner in "a"
  08011201611801f201400a120801120161180120013001a201040880c0010a2a
  0801120161180120023001aa011c0a03612d311080c001188004220764656661
  756c742a016138808006
#     8    0.090075 partner out a                Batch of 2
#     8.1                                 sender=b epoch=1 answers=1 CommandComplete space={free_bytes=32768 total_bytes=32768}
#     8.2                                 sender=b epoch=1 answers=2 CommandComplete applied_lsn=1
record 90075 partner out "a"
  08011201621801f201260a15080112016218012801620a1a0808808002108080
  020a0d08011201621801280262023801
