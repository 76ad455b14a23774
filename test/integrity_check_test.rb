# frozen_string_literal: true

require_relative "test_helper"

class IntegrityCheckTest < SolidJobsTest
  def test_a_clean_keyspace_is_ok
    LedgerTask.enqueue_many([["p", "a"], ["p", "b"]])
    LedgerTask.enqueue_after(60, "p", "c")
    report = SolidJobs::IntegrityCheck.run
    assert report.ok?, report.to_h.inspect
    assert_equal({"default" => 2}, report.counts[:ready])
    assert_equal 1, report.counts[:planned]
    assert_equal 0, report.counts[:claimed]
  end

  def test_reports_every_kind_of_finding_and_writes_nothing
    LedgerTask.enqueue("p", "ok")
    redis.lpush(key("channel:default"), "{broken")
    redis.lpush(key("channel:stray"), JSON.generate(SolidJobs::Native::Client.build("LedgerTask", [1], "stray", 3, nil)))
    redis.zadd(key("retrying"), 1, "default|not-json")
    # A node that died holding a claim, and claims of a node nobody registered.
    redis.sadd(key("nodes"), "dead-node")
    redis.hset(key("claims:dead-node"), "7",
               "default|1|#{JSON.generate(SolidJobs::Native::Client.build("LedgerTask", [], "default", 3, nil))}")
    redis.hset(key("claims:ghost"), "8", "default|1|{}")
    configure_solid_jobs(channels: %w[critical])
    before = redis.info("commandstats").keys

    report = SolidJobs::IntegrityCheck.run
    refute report.ok?
    assert_equal [{node_id: "ghost", claims: 1}], report.orphaned_claims
    assert_equal [{node_id: "dead-node", claims: 1}], report.dead_node_claims
    assert_equal %w[stray], report.unknown_channels
    assert_equal %w[default stray], report.unserved_channels.sort
    wheres = report.undecodable.map { |u| u[:where] }
    assert_includes wheres, "channel:default"
    assert_includes wheres, "retrying"
    assert_includes wheres, "claims:ghost"
    assert_equal 2, report.counts[:claimed]
    write_commands = redis.info("commandstats").keys - before
    assert_empty write_commands & %w[cmdstat_set cmdstat_del cmdstat_hdel cmdstat_lpush cmdstat_rpush], "read-only"
  end
end
