# frozen_string_literal: true

module SolidJobs
  # Questions about classes and objects SolidJobs did not define (task
  # classes, their superclasses, the errors they raise, the values they
  # hold), asked through the core methods themselves instead of the
  # object's own. A class may redefine `name`, `include?`, `respond_to?`,
  # `superclass` and friends for its own purposes (`extend Enumerable`
  # replaces `include?` with one that calls `each`), and that must neither
  # change what SolidJobs sees nor raise inside a worker.
  #
  # The UnboundMethods are looked up per call: they cannot be made
  # Ractor-shareable, and worker Ractors ask these questions too.
  module Reflection
    module_function

    # Module#name: a String, or nil for an anonymous module.
    def name(mod) = Module.instance_method(:name).bind_call(mod)

    def superclass(klass) = Class.instance_method(:superclass).bind_call(klass)

    def method_defined?(klass, method) = Module.instance_method(:method_defined?).bind_call(klass, method)

    # The object's class; nil for a BasicObject, which has no Kernel#class.
    def class_of(object)
      Kernel === object ? Kernel.instance_method(:class).bind_call(object) : nil
    end

    # The name of the object's class ("" when it has none), e.g. for an error.
    def class_name(object)
      klass = class_of(object)
      (klass && name(klass)) || ""
    end

    def instance_variables(object) = Kernel.instance_method(:instance_variables).bind_call(object)

    def instance_variable_get(object, ivar) = Kernel.instance_method(:instance_variable_get).bind_call(object, ivar)
  end
end
