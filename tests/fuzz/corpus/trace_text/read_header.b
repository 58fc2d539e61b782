ftvm-trace-text 1
# b.trace; ftvmctl trace binary makes the binary trace back from the lines
# that do not start with '#' (common/TRACE.md).
format 1
header protocol=1
header node=b
header partner_endpoint=127.0.0.1:35595
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
header started_realtime=2026-11-22T19:32:40Z
header started_monotonic_us=62068417817
#     1    0.000384 partner out 127.0.0.1:35595  sender=b epoch=1 Hello node_id=b version=1 epoch=1 page_size=512 frame_count=32 initiator=true state=STARTING
record 384 partner out "127.0.0.1:35595"
  0801120162180152100a016210011801208004282030013801
#     2    0.000663 partner in  127.0.0.1:35595  sender=a epoch=1 Hello node_id=a version=1 epoch=1 page_size=512 frame_count=32 state=STARTING
record 663 partner in "127.0.0.1:35595"
  08011201611801520e0a01611001180120800428203801
#     3    0.000698 partner out a                sender=b epoch=1 Heartbeat sent_us=62068418513 state=ACTIVE
record 698 partner out "a"
  080112016218015a0908d1cfc39ce7011002
#     4    0.000752 partner in  a                sender=a epoch=1 Heartbeat sent_us=62068418407 state=ACTIVE
record 752 partner in "a"
  080112016118015a0908e7cec39ce7011002
#     5    0.082051 client  in  client 1 pid 22105 id=1 StatusRequest
record 82051 client in "client 1 pid 22105"
  08015200
#     6    0.082119 client  out client 1 pid 22105 id=1 StatusReply node=b state=active epoch=1 transport=tcp transport_reason="auto: no RDMA device (ibv_get_device_list found none), using tcp" partner={id=a link=up state=active endpoint=127.0.0.1:35595 link_changes=1 store_state=starting store_epoch=1 store_silent_ms=81} frames_total=32 frames_free=32 page_size=512 pid=22084 reason="partner a linked at epoch 1" pool_blocks=1 pool_blocks_in_use=1 pool_block_bytes=16384
record 82119 client out "client 1 pid 22105"
  080152b9010a01621206616374697665180122037463702a406175746f3a206e
  6f2052444d412064657669636520286962765f6765745f6465766963655f6c69
  737420666f756e64206e6f6e65292c207573696e672074637032300a01611202
  75701a06616374697665220f3132372e302e302e313a333535393528013a0873
  74617274696e67400148513820402058800460c4ac016a1b706172746e657220
  61206c696e6b65642061742065706f63682031f00101f801018002808001
#     7    0.118569 partner in  a                Batch of 2
#     7.1                                 sender=a epoch=1 seq=1 lsn=1 SpaceRequest bytes=2048
#     7.2                                 sender=a epoch=1 seq=2 lsn=1 AllocateMemory guid=a-1 size=2048 block_size=512 policy=default home=a header=<10 bytes crc32c 0x3337776d> store_offset=65536
record 118569 partner in "a"
  08011201611801f2014a0a110801120161180120013001a201030880100a3508
  01120161180120023001aa01270a03612d31108010188004220764656661756c
  742a0161320a6a6f75726e616c20763138808004
#     8    0.118739 partner out a                Batch of 2
#     8.1                                 sender=b epoch=1 answers=1 CommandComplete space={free_bytes=32768 total_bytes=32768}
#     8.2                                 sender=b epoch=1 answers=2 CommandComplete applied_lsn=1
record 118739 partner out "a"
  08011201621801f201260a15080112016218012801620a1a0808808002108080
  020a0d08011201621801280262023801
#     9    0.123122 client  in  client 2 pid 22108 id=1 HeaderRequest guid=a-1
record 123122 client in "client 2 pid 22108"
  080172050a03612d31
#    10    0.123134 client  out client 2 pid 22108 id=1 Header guid=a-1 size=2048 block_size=512 pages=4 policy=default home=a owner=a header=<10 bytes crc32c 0x3337776d>
record 123134 client out "client 2 pid 22108"
  080172280a03612d3110801018800420042a0764656661756c743201613a0161
  420a6a6f75726e616c207631
