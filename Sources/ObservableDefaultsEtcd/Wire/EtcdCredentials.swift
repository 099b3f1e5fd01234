import ObservableDefaults

/// The wire layer's name for the store's credentials type (`DefaultsStore.EtcdCredentials`): one
/// type, so that the store hands its credentials to the client as they are.
package typealias EtcdCredentials = DefaultsStore.EtcdCredentials
